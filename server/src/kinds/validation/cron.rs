//! A CronJob's `schedule` and `timeZone`, as kube's `validateScheduleFormat` and
//! `validateTimeZone` check them: the schedule parsed as robfig/cron's standard parser parses
//! it (five fields, or a descriptor such as `@hourly` or `@every 1h`), with its error words;
//! no `TZ=`/`CRON_TZ=` in a schedule (unless the stored one already had it, and then not with a
//! `timeZone`); a time zone that is an explicit IANA name.

use std::str::FromStr;
use std::sync::LazyLock;

use chrono_tz::Tz;
use regex::Regex;
use serde_json::Value;

use super::str_of;
use crate::machinery::duration::parse_duration;
use crate::machinery::errors::go_quote;
use crate::machinery::meta::Causes;

/// One field of a schedule: its bounds and the names it accepts.
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [&'static str],
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// The five fields, in order: minute, hour, day of month, month (named from 1), day of week
/// (named from 0).
const FIELDS: [Bounds; 5] = [
    Bounds {
        min: 0,
        max: 59,
        names: &[],
    },
    Bounds {
        min: 0,
        max: 23,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 31,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 12,
        names: &MONTHS,
    },
    Bounds {
        min: 0,
        max: 6,
        names: &DAYS,
    },
];

/// The descriptors robfig/cron accepts.
const DESCRIPTORS: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Checks a CronJob's schedule and time zone; `tz_allowed`: the stored schedule already had a
/// `TZ=` (kube keeps accepting it on update).
pub fn schedule(spec: &Value, tz_allowed: bool, causes: &mut Causes) {
    let schedule = str_of(spec, "schedule");
    let at = "spec.schedule";
    let invalid = |why: &str| {
        (
            at.to_string(),
            format!("Invalid value: {}: {why}", go_quote(schedule)),
        )
    };
    if schedule.is_empty() {
        causes.push((at.to_string(), "Required value".to_string()));
    } else {
        if let Err(why) = parse(schedule) {
            causes.push(invalid(&why));
        }
        let has_tz = schedule.contains("TZ");
        if tz_allowed && has_tz && !spec["timeZone"].is_null() {
            causes.push(invalid(
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            ));
        } else if !tz_allowed && has_tz {
            causes.push(invalid(
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
    }
    if let Some(zone) = spec["timeZone"].as_str() {
        time_zone(zone, causes);
    }
}

/// The characters of each part of a time zone name kube accepts.
static ZONE_PART: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z.\-_0-9+]{1,14}$").expect("valid pattern"));

/// kube's `validateTimeZone`.
fn time_zone(zone: &str, causes: &mut Causes) {
    let at = "spec.timeZone";
    let invalid = |why: &str| {
        (
            at.to_string(),
            format!("Invalid value: {}: {why}", go_quote(zone)),
        )
    };
    if zone.is_empty() {
        causes.push(invalid("timeZone must be nil or non-empty string"));
        return;
    }
    let unknown = format!("unknown time zone {zone}");
    let odd_part = zone
        .split('/')
        .any(|p| p == "." || p == ".." || p.starts_with('-') || !ZONE_PART.is_match(p));
    if odd_part {
        causes.push(invalid(&unknown));
        return;
    }
    if zone.eq_ignore_ascii_case("Local") {
        causes.push(invalid(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    if !known_zone(zone) {
        causes.push(invalid(&unknown));
    }
}

/// Whether Go's `time.LoadLocation` finds `zone` (`UTC` and `Local` are its own).
fn known_zone(zone: &str) -> bool {
    zone == "UTC" || zone == "Local" || Tz::from_str(zone).is_ok()
}

/// robfig/cron's `ParseStandard`: why `spec` is not a schedule, in its words.
fn parse(spec: &str) -> Result<(), String> {
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let (zone, rest) = spec.split_once(' ').unwrap_or((spec, ""));
        let zone = zone.split_once('=').map_or("", |(_, z)| z);
        if !known_zone(zone) {
            return Err(format!("provided bad location {zone}: unknown time zone {zone}"));
        }
        spec = rest.trim();
    }
    if spec.starts_with('@') {
        return descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != FIELDS.len() {
        return Err(format!(
            "expected exactly {} fields, found {}: [{}]",
            FIELDS.len(),
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, bounds) in fields.iter().zip(&FIELDS) {
        for expr in field.split(',') {
            range(expr, bounds)?;
        }
    }
    Ok(())
}

/// robfig/cron's `parseDescriptor`.
fn descriptor(spec: &str) -> Result<(), String> {
    if DESCRIPTORS.contains(&spec) {
        return Ok(());
    }
    match spec.strip_prefix("@every ") {
        Some(every) => parse_duration(every)
            .map(|_| ())
            .map_err(|e| format!("failed to parse duration {spec}: {e}")),
        None => Err(format!("unrecognized descriptor: {spec}")),
    }
}

/// robfig/cron's `getRange` of one comma-separated part of a field.
fn range(expr: &str, bounds: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (bounds.min, bounds.max)
    } else {
        let start = int_or_name(low_and_high[0], bounds.names)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], bounds.names)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = int(range_and_step[1])?;
            if low_and_high.len() == 1 {
                end = bounds.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        ));
    }
    if end > bounds.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

/// robfig/cron's `parseIntOrName`: a name the field knows (any case), or a number.
fn int_or_name(expr: &str, names: &[&str]) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    let first = if names.len() == MONTHS.len() { 1 } else { 0 };
    match names.iter().position(|n| *n == lower) {
        Some(i) => Ok(i as u64 + first),
        None => int(expr),
    }
}

/// robfig/cron's `mustParseInt`, with Go's `strconv.Atoi` errors.
fn int(expr: &str) -> Result<u64, String> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: invalid syntax",
            go_quote(expr)
        ));
    }
    let Ok(n) = expr.parse::<i64>() else {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: value out of range",
            go_quote(expr)
        ));
    };
    u64::try_from(n).map_err(|_| format!("negative number ({n}) not allowed: {expr}"))
}
