//! Points in time as Kubernetes writes them, in one place: `metav1.Time` (RFC 3339 in UTC to
//! the second, Go's `2006-01-02T15:04:05Z07:00` of a UTC time), `metav1.MicroTime` (six
//! fractional digits, `2006-01-02T15:04:05.000000Z07:00`), the RFC 3339 text Go's
//! `time.RFC3339` layout reads, and the seconds and nanoseconds of a protobuf `Timestamp`.
//! The calendar is the `time` crate's; this module only pins the formats kube uses.

use time::format_description::well_known::Rfc3339;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

/// A time kube could not read or write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    /// Text that is not an RFC 3339 time as Go's `time.RFC3339` layout reads it.
    #[error("invalid RFC 3339 time {0:?}")]
    Invalid(String),
    /// A time outside the years Go's `Time.MarshalJSON` writes.
    #[error("timestamp {0}s is outside the years 0 to 9999")]
    OutOfRange(i64),
}

/// `metav1.Time`, once the time is in UTC.
const TIME: &[BorrowedFormatItem<'_>] = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");

/// `metav1.MicroTime`, once the time is in UTC (the digits are truncated, as Go truncates).
const MICRO_TIME: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

/// `t` in UTC as `description` (a format description of date, time and literal parts) lays
/// it out.
pub fn format_utc(t: OffsetDateTime, description: &[BorrowedFormatItem<'_>]) -> String {
    t.to_offset(UtcOffset::UTC)
        .format(description)
        .expect("a date, a time and literals format every OffsetDateTime")
}

/// `t` as `metav1.Time` writes it: `2006-01-02T15:04:05Z`.
pub fn format_time(t: OffsetDateTime) -> String {
    format_utc(t, TIME)
}

/// `t` as `metav1.MicroTime` writes it: `2006-01-02T15:04:05.000000Z`.
pub fn format_micro_time(t: OffsetDateTime) -> String {
    format_utc(t, MICRO_TIME)
}

/// The current time as kube-apiserver writes `creationTimestamp`.
pub fn now_rfc3339() -> String {
    format_time(OffsetDateTime::now_utc())
}

/// Parses an RFC 3339 time (`2006-01-02T15:04:05Z`, a fraction and a `±hh:mm` offset allowed)
/// as Go's `time.RFC3339` layout does, which is stricter than RFC 3339 itself: the date and the
/// time are separated by an upper-case `T`, UTC is an upper-case `Z`, and there is no leap
/// second.
pub fn parse(text: &str) -> Result<OffsetDateTime, TimestampError> {
    let b = text.as_bytes();
    let go_layout = b.get(10) == Some(&b'T') && b.get(17..19) != Some(b"60") && !text.ends_with('z');
    OffsetDateTime::parse(text, &Rfc3339)
        .ok()
        .filter(|_| go_layout)
        .ok_or_else(|| TimestampError::Invalid(text.to_string()))
}

/// Formats a protobuf `Timestamp` (Unix seconds and nanoseconds) as `metav1.Time`, or with
/// `micros` as `metav1.MicroTime`. Out-of-range nanoseconds are normalized as Go's `time.Unix`
/// does; years outside 0..=9999 are an error, as in Go's `Time.MarshalJSON`.
pub fn format_rfc3339(seconds: i64, nanos: i32, micros: bool) -> Result<String, TimestampError> {
    let t =
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(seconds) * 1_000_000_000 + i128::from(nanos))
            .ok()
            .filter(|t| (0..=9999).contains(&t.year()))
            .ok_or(TimestampError::OutOfRange(seconds))?;
    Ok(if micros {
        format_micro_time(t)
    } else {
        format_time(t)
    })
}

/// Parses an RFC 3339 time (as [`parse`]) into a protobuf `Timestamp`: Unix seconds and
/// nanoseconds.
pub fn parse_rfc3339(text: &str) -> Result<(i64, i32), TimestampError> {
    let t = parse(text)?;
    // The nanosecond of a second is below 10^9, which fits in i32.
    Ok((t.unix_timestamp(), t.nanosecond() as i32))
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
    fn go_layout_is_stricter_than_rfc_3339() {
        assert!(parse("2016-12-31T23:59:59Z").is_ok());
        for t in [
            "2024-01-01t00:00:00Z",
            "2024-01-01T00:00:00z",
            "2016-12-31T23:59:60Z",
        ] {
            assert!(parse(t).is_err(), "{t}");
        }
    }

    #[test]
    fn times_are_written_in_utc() {
        let t = parse("2024-01-02T04:04:05.123456789+01:00").unwrap();
        assert_eq!(format_time(t), "2024-01-02T03:04:05Z");
        assert_eq!(format_micro_time(t), "2024-01-02T03:04:05.123456Z");
    }
}
