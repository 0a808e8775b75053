//! The text forms of `metav1.Time`, `metav1.MicroTime` and `metav1.Duration` in JSON: RFC 3339
//! timestamps (second or microsecond precision, always UTC) and Go duration strings
//! (`1h2m3.5s`). Written here because their protobuf forms are seconds/nanoseconds, and the
//! full proleptic-Gregorian range Go accepts (years 0 to 9999) has to round-trip exactly.

/// Days in one 400-year cycle of the Gregorian calendar.
const DAYS_PER_ERA: i64 = 146_097;

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Count years from March so the leap day is the last day of the year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * DAYS_PER_ERA + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(DAYS_PER_ERA);
    let doe = z.rem_euclid(DAYS_PER_ERA);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Formats Unix seconds and nanoseconds as RFC 3339 in UTC: `2006-01-02T15:04:05Z`, or with
/// `micros` six fractional digits (`2006-01-02T15:04:05.000000Z`, Go's `RFC3339Micro`).
/// Out-of-range nanoseconds are normalized as Go's `time.Unix` does; years outside 0..=9999
/// are an error, as in Go's `Time.MarshalJSON`.
pub fn format_rfc3339(seconds: i64, nanos: i32, micros: bool) -> Result<String, String> {
    let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
    let secs = total.div_euclid(1_000_000_000);
    let frac = total.rem_euclid(1_000_000_000) as u32;
    let secs = i64::try_from(secs).map_err(|_| "timestamp out of range".to_string())?;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return Err(format!("timestamp {seconds}s is outside the years 0 to 9999"));
    }
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let mut out = format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}");
    if micros {
        out.push_str(&format!(".{:06}", frac / 1000));
    }
    out.push('Z');
    Ok(out)
}

fn digits(s: &[u8], n: usize) -> Option<u32> {
    let part = s.get(..n)?;
    part.iter().try_fold(0u32, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

/// Parses an RFC 3339 timestamp (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`) into Unix
/// seconds and nanoseconds.
pub fn parse_rfc3339(text: &str) -> Result<(i64, i32), String> {
    let bad = || format!("invalid RFC 3339 time {text:?}");
    let s = text.as_bytes();
    if s.len() < 20 || s[4] != b'-' || s[7] != b'-' || s[10] != b'T' || s[13] != b':' || s[16] != b':' {
        return Err(bad());
    }
    let year = i64::from(digits(s, 4).ok_or_else(bad)?);
    let month = digits(&s[5..], 2).ok_or_else(bad)?;
    let day = digits(&s[8..], 2).ok_or_else(bad)?;
    let hour = digits(&s[11..], 2).ok_or_else(bad)?;
    let minute = digits(&s[14..], 2).ok_or_else(bad)?;
    let second = digits(&s[17..], 2).ok_or_else(bad)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(bad());
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(bad());
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return Err(bad());
        }
        for (i, &c) in frac[..n].iter().enumerate() {
            if i < 9 {
                nanos += u32::from(c - b'0') * 10u32.pow(8 - i as u32);
            }
        }
        rest = &frac[n..];
    }
    let offset = match rest {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let oh = digits(&[*h1, *h2], 2).ok_or_else(bad)?;
            let om = digits(&[*m1, *m2], 2).ok_or_else(bad)?;
            if oh > 23 || om > 59 {
                return Err(bad());
            }
            let off = i64::from(oh * 3600 + om * 60);
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset;
    // nanos < 10^9 fits in i32.
    Ok((secs, nanos as i32))
}

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
    fn timestamps_round_trip() {
        for (text, secs) in [
            ("1970-01-01T00:00:00Z", 0),
            ("2024-02-29T12:34:56Z", 1_709_210_096),
            ("0001-01-01T00:00:00Z", -62_135_596_800),
            ("1969-12-31T23:59:59Z", -1),
            ("9999-12-31T23:59:59Z", 253_402_300_799),
        ] {
            assert_eq!(parse_rfc3339(text).unwrap(), (secs, 0), "{text}");
            assert_eq!(format_rfc3339(secs, 0, false).unwrap(), text);
        }
        assert_eq!(
            parse_rfc3339("2024-01-02T03:04:05.123456789+01:30").unwrap(),
            (1_704_164_645 - 5400, 123_456_789)
        );
        assert_eq!(
            format_rfc3339(1_704_164_645, 123_456_789, true).unwrap(),
            "2024-01-02T03:04:05.123456Z"
        );
        assert_eq!(
            format_rfc3339(1_704_164_645, 999_999_999, false).unwrap(),
            "2024-01-02T03:04:05Z"
        );
        // Nanoseconds outside [0, 1e9) normalize into the seconds.
        assert_eq!(
            format_rfc3339(0, -1, true).unwrap(),
            "1969-12-31T23:59:59.999999Z"
        );
    }

    #[test]
    fn bad_timestamps_are_errors() {
        for t in [
            "",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-01-01 00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+0100",
            "٢٠٢٤-01-01T00:00:00Z",
        ] {
            assert!(parse_rfc3339(t).is_err(), "{t}");
        }
        assert!(format_rfc3339(i64::MAX, 0, false).is_err());
        assert!(format_rfc3339(i64::MIN, i32::MIN, false).is_err());
    }

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
