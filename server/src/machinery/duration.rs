//! Go duration strings (`1h2m3.5s`): the text form of `metav1.Duration` in JSON (whose
//! protobuf form is nanoseconds) and of a CronJob's `@every` schedule. Go's syntax (a sign,
//! fractions in any unit, `µs`), its parser's error words and its `time.Duration.String()` form
//! are not humantime's or the `time` crate's, so they are written here; times (`metav1.Time`,
//! `MicroTime`) are [`crate::machinery::timestamp`]'s.

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

/// Parses a Go duration string (`1h30m`, `-1.5s`, `300ms`, `0`) into nanoseconds as Go's
/// `time.ParseDuration` does, refusing what it refuses with its words (`time: invalid
/// duration "1x."`, `time: missing unit in duration "1"`, `time: unknown unit "d" in duration
/// "1d"`).
pub fn parse_duration(text: &str) -> Result<i64, String> {
    const LIMIT: u64 = 1 << 63;
    let invalid = || format!("time: invalid duration {}", quote(text));
    let (negative, mut s) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for c in s[..digits].bytes() {
            if whole > LIMIT / 10 {
                return Err(invalid());
            }
            whole = whole * 10 + u64::from(c - b'0');
            if whole > LIMIT {
                return Err(invalid());
            }
        }
        s = &s[digits..];
        let mut fraction: Option<(u64, f64)> = None;
        if let Some(rest) = s.strip_prefix('.') {
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            let (mut f, mut scale, mut overflow) = (0u64, 1f64, false);
            for c in rest[..n].bytes() {
                if overflow || f > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                f = f * 10 + u64::from(c - b'0');
                scale *= 10.0;
            }
            if n > 0 {
                fraction = Some((f, scale));
            }
            s = &rest[n..];
        }
        if digits == 0 && fraction.is_none() {
            return Err(invalid());
        }
        let unit_len = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", quote(text)));
        }
        let unit: u64 = match &s[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            other => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    quote(other),
                    quote(text)
                ))
            }
        };
        s = &s[unit_len..];
        if whole > LIMIT / unit {
            return Err(invalid());
        }
        let mut part = whole * unit;
        if let Some((f, scale)) = fraction.filter(|(f, _)| *f > 0) {
            // Go computes a fraction in floating point, exact to the nanosecond for hours.
            part += (f as f64 * (unit as f64 / scale)) as u64;
            if part > LIMIT {
                return Err(invalid());
            }
        }
        total += part;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    match (negative, i64::try_from(total)) {
        (true, _) => Ok((total as i128).wrapping_neg() as i64),
        (false, Ok(n)) => Ok(n),
        (false, Err(_)) => Err(invalid()),
    }
}

/// The `time` package's own quoting: printable ASCII as it is (a quote or backslash escaped),
/// every byte of anything else as `\xNN`.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c.is_ascii() && c >= ' ' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    out.push('"');
    out
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
        assert_eq!(parse_duration("1.5h").unwrap(), 5_400_000_000_000);
        for (t, why) in [
            ("", r#"time: invalid duration """#),
            ("1", r#"time: missing unit in duration "1""#),
            ("1x", r#"time: unknown unit "x" in duration "1x""#),
            ("1d2h", r#"time: unknown unit "d" in duration "1d2h""#),
            ("1é", r#"time: unknown unit "\xc3\xa9" in duration "1\xc3\xa9""#),
            ("s", r#"time: invalid duration "s""#),
            ("-", r#"time: invalid duration "-""#),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "99999999999999999999h",
                r#"time: invalid duration "99999999999999999999h""#,
            ),
            ("1.s.", r#"time: invalid duration "1.s.""#),
            (".", r#"time: invalid duration ".""#),
        ] {
            assert_eq!(parse_duration(t).unwrap_err(), why, "{t}");
        }
    }
}
