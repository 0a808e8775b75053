//! The text form of `metav1.Duration` in JSON: Go duration strings (`1h2m3.5s`), whose
//! protobuf form is nanoseconds. Go's syntax (a sign, fractions in any unit, `µs`) and its
//! `time.Duration.String()` form are not humantime's or the `time` crate's, so they are written
//! here; times (`metav1.Time`, `MicroTime`) are [`crate::machinery::timestamp`]'s.

/// Formats nanoseconds as Go's `time.Duration.String()` does (`1h0m0s`, `1.5s`, `300ms`).
pub fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    let fraction = |value: u64, places: u32| -> String {
        let scale = 10u64.pow(places);
        let whole = value / scale;
        let frac = value % scale;
        if frac == 0 {
            return whole.to_string();
        }
        let f = format!("{frac:0width$}", width = places as usize);
        format!("{whole}.{}", f.trim_end_matches('0'))
    };
    if u < 1_000_000_000 {
        let (places, unit) = match u {
            0..1_000 => (0, "ns"),
            1_000..1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        return format!("{sign}{}{unit}", fraction(u, places));
    }
    let secs = u / 1_000_000_000;
    let sub = u % 1_000_000_000;
    let mut out = format!("{}s", fraction((secs % 60) * 1_000_000_000 + sub, 9));
    let minutes = secs / 60;
    if minutes > 0 {
        out = format!("{}m{out}", minutes % 60);
        let hours = minutes / 60;
        if hours > 0 {
            out = format!("{hours}h{out}");
        }
    }
    format!("{sign}{out}")
}

/// Parses a Go duration string (`1h30m`, `-1.5s`, `300ms`, `0`) into nanoseconds.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let bad = || format!("invalid duration {text:?}");
    let (negative, mut s) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(bad());
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &s[..int_len];
        s = &s[int_len..];
        let mut frac_part = "";
        if let Some(rest) = s.strip_prefix('.') {
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &rest[..n];
            s = &rest[n..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(bad());
        }
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        let unit: u128 = match &s[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        s = &s[unit_len..];
        let mut value: u128 = 0;
        for c in int_part.bytes() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(c - b'0')))
                .filter(|v| *v <= u128::from(u64::MAX))
                .ok_or_else(bad)?;
        }
        let mut part = value.checked_mul(unit).ok_or_else(bad)?;
        // Fractional digits beyond nanosecond precision of the largest unit do not matter.
        let mut scale: u128 = 1;
        let mut frac: u128 = 0;
        for c in frac_part.bytes().take(18) {
            frac = frac * 10 + u128::from(c - b'0');
            scale *= 10;
        }
        part += frac * unit / scale;
        total = total.checked_add(part).ok_or_else(bad)?;
        if total > 1u128 << 63 {
            return Err(bad());
        }
    }
    if negative {
        // -2^63 is representable.
        Ok((total as i128).wrapping_neg() as i64)
    } else {
        i64::try_from(total).map_err(|_| bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_match_go() {
        for (n, text) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (300_000_000, "300ms"),
            (1_500_000_000, "1.5s"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (-5_000_000_000, "-5s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(format_duration(n), text);
            assert_eq!(parse_duration(text).unwrap(), n, "{text}");
        }
        assert_eq!(parse_duration("1h30m").unwrap(), 5_400_000_000_000);
        assert_eq!(parse_duration(".5s").unwrap(), 500_000_000);
        assert_eq!(parse_duration("1us").unwrap(), 1_000);
        for t in [
            "",
            "1",
            "1x",
            "s",
            "-",
            "9223372036854775808ns",
            "99999999999999999999h",
            "1.s.",
            ".",
        ] {
            assert!(parse_duration(t).is_err(), "{t}");
        }
    }
}
