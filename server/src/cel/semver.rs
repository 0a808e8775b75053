//! kube's `semver` CEL library (`isSemver`, `semver`, and a version's `major`, `minor`,
//! `patch`, `isGreaterThan`, `isLessThan` and `compareTo`), with the versions parsed as
//! kube's library parses them (blang/semver v4, strict: no `v`, no leading zeros, all three
//! numbers) and its messages for a bad version, and kube's optional normalization (a leading
//! `v` dropped, a missing minor or patch added, leading zeros removed). The `semver` crate is
//! not used: its messages and its ordering (build metadata counts there) differ from kube's.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{BOOL_TYPE, STRING_TYPE};
use cel::objects::{Opaque, Value};
use cel::ExecutionError;

use super::library::{opaque, opaque_type, overload, str_arg, Call, Overload};
use crate::machinery::errors::go_quote;

/// The CEL type name of a version.
const SEMVER: &str = "kubernetes.Semver";

/// A prerelease identifier: numbers rank below words.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Pre {
    Number(u64),
    Word(String),
}

/// A semantic version (`semver('1.2.3-rc.1+build.5')`).
#[derive(Debug, Clone)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Pre>,
}

/// Versions are equal when they have the same precedence (build metadata does not count).
impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.precedence(other) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        SEMVER
    }
}

/// Why a string is not a version: blang/semver's messages, as kube reports them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SemverError {
    /// Nothing to parse.
    #[error("Version string empty")]
    Empty,
    /// Fewer than three dot-separated parts.
    #[error("No Major.Minor.Patch elements found")]
    NotThreeParts,
    /// A number holds something other than digits.
    #[error("Invalid character(s) found in {part} number {}", go_quote(.value))]
    InvalidNumber {
        /// `major`, `minor` or `patch`.
        part: &'static str,
        /// What was written.
        value: String,
    },
    /// A number starts with a zero.
    #[error("{part} number must not contain leading zeroes {}", go_quote(.value))]
    LeadingZeroes {
        /// `Major`, `Minor` or `Patch`.
        part: &'static str,
        /// What was written.
        value: String,
    },
    /// A number is empty or too large (Go's `strconv.ParseUint` message).
    #[error("strconv.ParseUint: parsing {}: {reason}", go_quote(.value))]
    NotANumber {
        /// What was written.
        value: String,
        /// `invalid syntax` or `value out of range`.
        reason: &'static str,
    },
    /// A prerelease identifier is empty.
    #[error("Prerelease is empty")]
    EmptyPrerelease,
    /// A numeric prerelease identifier starts with a zero.
    #[error("Numeric PreRelease version must not contain leading zeroes {}", go_quote(.0))]
    PrereleaseLeadingZeroes(String),
    /// A prerelease identifier holds other than letters, digits and `-`.
    #[error("Invalid character(s) found in prerelease {}", go_quote(.0))]
    InvalidPrerelease(String),
    /// A build identifier is empty.
    #[error("Build meta data is empty")]
    EmptyBuild,
    /// A build identifier holds other than letters, digits and `-`.
    #[error("Invalid character(s) found in build meta data {}", go_quote(.0))]
    InvalidBuild(String),
    /// A version missing its minor or patch number has a prerelease or build (normalizing).
    #[error("short version cannot contain PreRelease/Build meta data")]
    ShortWithMetadata,
}

fn digits_only(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit())
}

fn alphanumeric_or_dash(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn leading_zero(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

/// Go's `strconv.ParseUint(s, 10, 64)` on a string of digits.
fn parse_u64(s: &str) -> Result<u64, SemverError> {
    let reason = if s.is_empty() {
        "invalid syntax"
    } else {
        "value out of range"
    };
    s.parse().map_err(|_| SemverError::NotANumber {
        value: s.to_string(),
        reason,
    })
}

/// One of the three numbers: digits, no leading zero.
fn number(s: &str, part: &'static str, title: &'static str) -> Result<u64, SemverError> {
    if !digits_only(s) {
        return Err(SemverError::InvalidNumber {
            part,
            value: s.to_string(),
        });
    }
    if leading_zero(s) {
        return Err(SemverError::LeadingZeroes {
            part: title,
            value: s.to_string(),
        });
    }
    parse_u64(s)
}

fn prerelease(s: &str) -> Result<Pre, SemverError> {
    if s.is_empty() {
        Err(SemverError::EmptyPrerelease)
    } else if digits_only(s) {
        if leading_zero(s) {
            return Err(SemverError::PrereleaseLeadingZeroes(s.to_string()));
        }
        parse_u64(s).map(Pre::Number)
    } else if alphanumeric_or_dash(s) {
        Ok(Pre::Word(s.to_string()))
    } else {
        Err(SemverError::InvalidPrerelease(s.to_string()))
    }
}

impl Semver {
    /// blang/semver's strict `Parse`.
    pub fn parse(s: &str) -> Result<Semver, SemverError> {
        if s.is_empty() {
            return Err(SemverError::Empty);
        }
        let parts: Vec<&str> = s.splitn(3, '.').collect();
        let [major, minor, rest] = parts.as_slice() else {
            return Err(SemverError::NotThreeParts);
        };
        let major = number(major, "major", "Major")?;
        let minor = number(minor, "minor", "Minor")?;
        let (rest, build) = match rest.split_once('+') {
            Some((r, b)) => (r, Some(b)),
            None => (*rest, None),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((p, pre)) => (p, Some(pre)),
            None => (rest, None),
        };
        let patch = number(patch, "patch", "Patch")?;
        let pre = match pre {
            Some(p) => p.split('.').map(prerelease).collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        for b in build.into_iter().flat_map(|b| b.split('.')) {
            if b.is_empty() {
                return Err(SemverError::EmptyBuild);
            }
            if !alphanumeric_or_dash(b) {
                return Err(SemverError::InvalidBuild(b.to_string()));
            }
        }
        Ok(Semver {
            major,
            minor,
            patch,
            pre,
        })
    }

    /// kube's `normalizeAndParse`: a leading `v` dropped, leading zeros removed from each of
    /// the three parts, a missing minor or patch added as 0, then the strict parse.
    pub fn parse_normalized(s: &str) -> Result<Semver, SemverError> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s
            .splitn(3, '.')
            .map(|p| {
                if p.len() < 2 {
                    return p.to_string();
                }
                let trimmed = p.trim_start_matches('0');
                if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                    trimmed.to_string()
                } else {
                    format!("0{trimmed}")
                }
            })
            .collect();
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err(SemverError::ShortWithMetadata);
            }
            parts.resize(3, "0".to_string());
        }
        Semver::parse(&parts.join("."))
    }

    /// blang/semver's `Compare`: the numbers, then a version without prerelease above one
    /// with, then the prerelease identifiers in turn (more identifiers rank higher).
    fn precedence(&self, other: &Semver) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            })
    }
}

/// The `semver` library's overloads, for the environment.
pub(super) fn functions() -> Vec<Overload> {
    let semver = || opaque_type(SEMVER);
    vec![
        (
            "isSemver",
            "is_semver_string",
            Call::Global,
            vec![STRING_TYPE],
            overload!(is_semver),
        ),
        (
            "isSemver",
            "is_semver_string_bool",
            Call::Global,
            vec![STRING_TYPE, BOOL_TYPE],
            overload!(is_semver),
        ),
        (
            "semver",
            "string_to_semver",
            Call::Global,
            vec![STRING_TYPE],
            overload!(to_semver),
        ),
        (
            "semver",
            "string_bool_to_semver",
            Call::Global,
            vec![STRING_TYPE, BOOL_TYPE],
            overload!(to_semver),
        ),
        (
            "major",
            "semver_major",
            Call::Member(semver()),
            vec![],
            overload!(major),
        ),
        (
            "minor",
            "semver_minor",
            Call::Member(semver()),
            vec![],
            overload!(minor),
        ),
        (
            "patch",
            "semver_patch",
            Call::Member(semver()),
            vec![],
            overload!(patch),
        ),
        (
            "isGreaterThan",
            "semver_is_greater_than",
            Call::Member(semver()),
            vec![semver()],
            overload!(is_greater_than),
        ),
        (
            "isLessThan",
            "semver_is_less_than",
            Call::Member(semver()),
            vec![semver()],
            overload!(is_less_than),
        ),
        (
            "compareTo",
            "semver_compare_to",
            Call::Member(semver()),
            vec![semver()],
            overload!(compare_to),
        ),
    ]
}

/// The version `args` spell: a string, normalized when the second argument is `true`.
fn parse_arg(name: &str, args: &[Value]) -> Result<Result<Semver, SemverError>, ExecutionError> {
    let s = str_arg(name, args, 0)?;
    Ok(match args.get(1) {
        Some(Value::Bool(true)) => Semver::parse_normalized(s),
        _ => Semver::parse(s),
    })
}

fn is_semver(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_arg("isSemver", args)?.is_ok()))
}

fn to_semver(args: &[Value]) -> Result<Value, ExecutionError> {
    let v = parse_arg("semver", args)?.map_err(|e| ExecutionError::function_error("semver", e))?;
    Ok(Value::Opaque(Arc::new(v)))
}

fn version<'a>(name: &str, args: &'a [Value], i: usize) -> Result<&'a Semver, ExecutionError> {
    opaque::<Semver>(name, args, i)
}

fn major(args: &[Value]) -> Result<Value, ExecutionError> {
    as_int("major", version("major", args, 0)?.major)
}

fn minor(args: &[Value]) -> Result<Value, ExecutionError> {
    as_int("minor", version("minor", args, 0)?.minor)
}

fn patch(args: &[Value]) -> Result<Value, ExecutionError> {
    as_int("patch", version("patch", args, 0)?.patch)
}

/// A version number as a CEL int (kube converts with Go's wrapping `int64()`; a number past
/// `i64::MAX` is an error here rather than a negative number).
fn as_int(name: &str, n: u64) -> Result<Value, ExecutionError> {
    i64::try_from(n)
        .map(Value::Int)
        .map_err(|_| ExecutionError::function_error(name, "integer overflow"))
}

fn ordering(name: &str, args: &[Value]) -> Result<Ordering, ExecutionError> {
    Ok(version(name, args, 0)?.precedence(version(name, args, 1)?))
}

fn is_greater_than(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(ordering("isGreaterThan", args)? == Ordering::Greater))
}

fn is_less_than(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(ordering("isLessThan", args)? == Ordering::Less))
}

fn compare_to(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(ordering("compareTo", args)? as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        Semver::parse(s).err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn versions_parse_strictly_with_blangs_messages() {
        assert!(Semver::parse("1.2.3-beta.1+build.1").is_ok());
        assert_eq!(err("v1.0"), "No Major.Minor.Patch elements found");
        assert_eq!(err(""), "Version string empty");
        assert_eq!(err("1"), "No Major.Minor.Patch elements found");
        assert_eq!(err("1.1"), "No Major.Minor.Patch elements found");
        assert_eq!(err("v1.0.0"), "Invalid character(s) found in major number \"v1\"");
        assert_eq!(err(" 1.0.0"), "Invalid character(s) found in major number \" 1\"");
        assert_eq!(err("1. 0.0"), "Invalid character(s) found in minor number \" 0\"");
        assert_eq!(err("1.0.0 "), "Invalid character(s) found in patch number \"0 \"");
        assert_eq!(
            err("01.01.01"),
            "Major number must not contain leading zeroes \"01\""
        );
        assert_eq!(err("1..0"), "strconv.ParseUint: parsing \"\": invalid syntax");
        assert_eq!(
            err("99999999999999999999.0.0"),
            "strconv.ParseUint: parsing \"99999999999999999999\": value out of range"
        );
        assert_eq!(err("1.0.0-"), "Prerelease is empty");
        assert_eq!(
            err("1.0.0-01"),
            "Numeric PreRelease version must not contain leading zeroes \"01\""
        );
        assert_eq!(
            err("1.0.0-a_b"),
            "Invalid character(s) found in prerelease \"a_b\""
        );
        assert_eq!(err("1.0.0+"), "Build meta data is empty");
        assert_eq!(
            err("1.0.0+a_b"),
            "Invalid character(s) found in build meta data \"a_b\""
        );
        assert_eq!(
            err("1.0.0.0"),
            "Invalid character(s) found in patch number \"0.0\""
        );
    }

    #[test]
    fn normalization_is_kubes() {
        for ok in ["v1.0.0", "01.01.01", "1", "1.1", "v01.01"] {
            assert!(Semver::parse_normalized(ok).is_ok(), "{ok}");
        }
        for bad in ["", " 1.0.0", "1. 0.0", "1.0.0 "] {
            assert!(Semver::parse_normalized(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Semver::parse_normalized("1-rc"),
            Err(SemverError::ShortWithMetadata)
        );
        assert_eq!(Semver::parse_normalized("v01.01"), Semver::parse("1.1.0"));
    }

    #[test]
    fn precedence_is_blangs() {
        let v = |s: &str| Semver::parse(s).expect("a version");
        let ordered = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.2.3",
            "2.0.0",
        ];
        for pair in ordered.windows(2) {
            assert_eq!(v(pair[0]).precedence(&v(pair[1])), Ordering::Less, "{pair:?}");
        }
        assert_eq!(v("1.0.0+a"), v("1.0.0+b"));
    }
}
