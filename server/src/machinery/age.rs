//! Ages as kubectl prints them: how long ago a timestamp was (`5m`, `3d4h`), measured to one
//! "now" per response, for the `Age` columns of built-in printers and custom resources alike.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::machinery::timestamp;

/// What printing needs beyond the object: the time ages are measured to.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    /// Now, in milliseconds since the Unix epoch.
    pub now_ms: i64,
}

impl Ctx {
    /// A context at the current time.
    pub fn now() -> Self {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Ctx { now_ms }
    }

    /// How long ago `timestamp` (RFC 3339) was, as kubectl shows ages; `<unknown>` without one.
    pub fn since(&self, timestamp: &Value) -> String {
        match timestamp.as_str().and_then(parse_time) {
            Some(t) => human_duration(self.now_ms.saturating_sub(t) / 1000),
            None => "<unknown>".into(),
        }
    }
}

/// kubectl's human-readable duration (`45s`, `3m20s`, `5h`, `12d`, `2y30d`) of `secs` seconds.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Parses an RFC 3339 timestamp (`2025-01-02T03:04:05Z`, fractions and offsets allowed) into
/// milliseconds since the Unix epoch.
pub fn parse_time(s: &str) -> Option<i64> {
    let t = timestamp::parse(s).ok()?;
    i64::try_from(t.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_read_like_kubectl() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (20 * 3600, "20h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400 + 10 * 86400, "3y10d"),
            (9 * 365 * 86400, "9y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn timestamps_parse_with_fractions_and_offsets() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(parse_time("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_time("2000-03-01T00:00:00Z"), Some(951_868_800_000));
        assert!(parse_time("yesterday").is_none());
        assert!(parse_time("2025-13-01T00:00:00Z").is_none());
        let ctx = Ctx {
            now_ms: parse_time("2025-06-01T12:00:00Z").unwrap(),
        };
        assert_eq!(ctx.since(&json!("2025-06-01T11:55:00Z")), "5m");
        assert_eq!(ctx.since(&Value::Null), "<unknown>");
    }
}
