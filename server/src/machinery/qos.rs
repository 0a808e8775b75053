//! A pod's quality-of-service class (`status.qosClass`), computed from its resource requests
//! and limits the way kube-apiserver does when a pod is created, and the resource quantities
//! it needs, parsed and written as kube writes them.

use serde_json::Value;

/// The resources that decide the QoS class.
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Largest number of digits accepted in a quantity (beyond it the value is not compared).
const MAX_DIGITS: usize = 30;

/// Parses a Kubernetes quantity (`500m`, `1.5Gi`, `2e3`, `128974848`) into billionths of the
/// unit, so that quantities written differently compare equal. `None` when it does not parse
/// or does not fit.
pub fn parse_quantity(s: &str) -> Option<i128> {
    let s = s.trim();
    let (negative, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || int_part.len() + frac_part.len() > MAX_DIGITS {
        return None;
    }
    let mut mantissa: i128 = 0;
    for d in int_part.bytes().chain(frac_part.bytes()) {
        if !d.is_ascii_digit() {
            return None;
        }
        mantissa = mantissa.checked_mul(10)?.checked_add(i128::from(d - b'0'))?;
    }
    // value = mantissa * 10^(exp10 - frac digits) * 2^exp2, in billionths: exp10 += 9.
    let (exp10, exp2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        e => {
            let exp = e.strip_prefix(['e', 'E'])?;
            let exp: i32 = exp.parse().ok().filter(|x: &i32| x.abs() <= 30)?;
            (exp, 0)
        }
    };
    let frac_digits = i32::try_from(frac_part.len()).ok()?;
    let scale = exp10 + 9 - frac_digits;
    let mut value = mantissa.checked_mul(1i128.checked_shl(exp2)?)?;
    if scale >= 0 {
        value = value.checked_mul(10i128.checked_pow(scale.unsigned_abs())?)?;
    } else {
        let div = 10i128.checked_pow(scale.unsigned_abs())?;
        // Round up to a whole billionth, as the API rounds quantities up.
        value = (value + div - 1) / div;
    }
    Some(if negative { -value } else { value })
}

/// A quantity given as a JSON string or number: its value in billionths, and whether it was
/// written with a binary suffix (`Ki`, `Mi`, ...), which decides how sums of it are shown.
pub fn quantity_value(v: &Value) -> Option<(i128, bool)> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let q = parse_quantity(&text)?;
    Some((q, text.trim_end().ends_with('i')))
}

/// A value in billionths written as kube writes quantities: binary suffixes for binary ones
/// that are whole, otherwise the largest decimal suffix that keeps the number whole.
pub fn format_quantity(billionths: i128, binary: bool) -> String {
    const UNIT: i128 = 1_000_000_000;
    if binary && billionths % UNIT == 0 {
        let mut n = billionths / UNIT;
        let mut suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].iter().peekable();
        let mut suffix = "";
        while let Some(s) = suffixes.next() {
            suffix = s;
            if n == 0 || n % 1024 != 0 || suffixes.peek().is_none() {
                break;
            }
            n /= 1024;
        }
        return format!("{n}{suffix}");
    }
    const DECIMAL: [(i128, &str); 10] = [
        (1_000_000_000_000_000_000_000_000_000, "E"),
        (1_000_000_000_000_000_000_000_000, "P"),
        (1_000_000_000_000_000_000_000, "T"),
        (1_000_000_000_000_000_000, "G"),
        (1_000_000_000_000_000, "M"),
        (1_000_000_000_000, "k"),
        (UNIT, ""),
        (1_000_000, "m"),
        (1_000, "u"),
        (1, "n"),
    ];
    if billionths == 0 {
        return "0".into();
    }
    let (scale, suffix) = DECIMAL
        .iter()
        .find(|(scale, _)| billionths % scale == 0)
        .copied()
        .unwrap_or((1, "n"));
    format!("{}{suffix}", billionths / scale)
}

/// A quantity written as a string, in kube's canonical form (apimachinery's `Quantity.String`,
/// what kube-apiserver stores and answers): the format its suffix chose — binary (`Ki`…),
/// decimal SI (none, `m`, `k`…) or a decimal exponent (`e3`) — and the largest unit that keeps
/// the number whole; a binary value under 1024, or not whole, is shown in decimal SI, as kube
/// shows it (`1024Mi` is `1Gi`, `1.5Gi` is `1536Mi`, `0.5` is `500m`, `1000` is `1k`, `1.5e3`
/// is `1500`). `None` when it does not parse.
pub fn canonical_quantity(text: &str) -> Option<String> {
    const UNIT: i128 = 1_000_000_000;
    let q = parse_quantity(text)?;
    let suffix = text
        .trim()
        .trim_start_matches(['+', '-'])
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    if suffix.starts_with(['e', 'E']) {
        if q == 0 {
            return Some("0".into());
        }
        // The largest power of a thousand, from 10^-9 up, that leaves the number whole.
        let mut exp: i32 = -9;
        let mut scale: i128 = 1;
        while exp < 18 && q % (scale * 1000) == 0 {
            scale *= 1000;
            exp += 3;
        }
        let n = q / scale;
        return Some(if exp == 0 {
            n.to_string()
        } else {
            format!("{n}e{exp}")
        });
    }
    let binary = suffix.ends_with('i') && q.abs() >= 1024 * UNIT && q % UNIT == 0;
    Some(format_quantity(q, binary))
}

fn resource_list(resources: Option<&Value>, which: &str) -> Vec<(&'static str, i128)> {
    let Some(list) = resources.and_then(|r| r.get(which)).and_then(Value::as_object) else {
        return Vec::new();
    };
    QOS_RESOURCES
        .iter()
        .filter_map(|name| {
            let q = list.get(*name)?;
            let v = match q {
                Value::String(s) => parse_quantity(s)?,
                Value::Number(n) => parse_quantity(&n.to_string())?,
                _ => return None,
            };
            (v > 0).then_some((*name, v))
        })
        .collect()
}

fn add(total: &mut Vec<(&'static str, i128)>, name: &'static str, v: i128) {
    match total.iter_mut().find(|(n, _)| *n == name) {
        Some((_, t)) => *t = t.saturating_add(v),
        None => total.push((name, v)),
    }
}

/// The QoS class of a pod spec: `Guaranteed` when every container limits cpu and memory and
/// requests equal limits, `BestEffort` when nothing requests or limits cpu or memory,
/// `Burstable` otherwise. Pod-level resources, when set, decide alone.
pub fn pod_qos(spec: &Value) -> &'static str {
    let pod_level = spec.get("resources").filter(|r| {
        !resource_list(Some(r), "requests").is_empty() || !resource_list(Some(r), "limits").is_empty()
    });
    let containers: Vec<Option<&Value>> = match pod_level {
        Some(r) => vec![Some(r)],
        None => ["initContainers", "containers"]
            .iter()
            .filter_map(|k| spec.get(*k).and_then(Value::as_array))
            .flatten()
            .map(|c| c.get("resources"))
            .collect(),
    };
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    let mut guaranteed = true;
    for res in containers {
        for (name, v) in resource_list(res, "requests") {
            add(&mut requests, name, v);
        }
        let own_limits = resource_list(res, "limits");
        if !QOS_RESOURCES
            .iter()
            .all(|r| own_limits.iter().any(|(n, _)| n == r))
        {
            guaranteed = false;
        }
        for (name, v) in own_limits {
            add(&mut limits, name, v);
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    let requests_match = requests
        .iter()
        .all(|(n, r)| limits.iter().any(|(ln, l)| ln == n && l == r));
    if guaranteed && requests_match && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_canonical_as_kube_writes_them() {
        for (written, canonical) in [
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("2000Mi", "2000Mi"),
            ("0.5Ki", "512"),
            ("1.1Gi", "1181116006400m"),
            ("0.5", "500m"),
            ("1000", "1k"),
            ("1000m", "1"),
            ("100m", "100m"),
            ("0.1", "100m"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("12e-3", "12e-3"),
            ("0", "0"),
            ("0Gi", "0"),
            ("-1.5Gi", "-1536Mi"),
            ("+2k", "2k"),
        ] {
            assert_eq!(
                canonical_quantity(written).as_deref(),
                Some(canonical),
                "{written}"
            );
        }
        assert_eq!(canonical_quantity("1.5.5"), None);
    }
    use serde_json::json;

    #[test]
    fn quantities_compare_across_notations() {
        assert_eq!(parse_quantity("500m"), parse_quantity("0.5"));
        assert_eq!(parse_quantity("1Gi"), parse_quantity("1024Mi"));
        assert_eq!(parse_quantity("2k"), parse_quantity("2e3"));
        assert_eq!(parse_quantity("1"), Some(1_000_000_000));
        assert_eq!(parse_quantity("-1m"), Some(-1_000_000));
        assert_eq!(parse_quantity("1n"), Some(1));
        assert!(parse_quantity("abc").is_none());
        assert!(parse_quantity("1Zi").is_none());
        assert!(parse_quantity(&"9".repeat(40)).is_none());
    }

    #[test]
    fn qos_classes() {
        let c = |res: Value| json!({"containers": [{"name": "c", "resources": res}]});
        assert_eq!(pod_qos(&c(json!({}))), "BestEffort");
        assert_eq!(pod_qos(&json!({})), "BestEffort");
        assert_eq!(
            pod_qos(&c(
                json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1024Mi"}})
            )),
            "Guaranteed"
        );
        assert_eq!(pod_qos(&c(json!({"requests": {"cpu": "100m"}}))), "Burstable");
        assert_eq!(
            pod_qos(&c(
                json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
            )),
            "Burstable"
        );
        let two = json!({"containers": [
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}},
            {"resources": {}}]});
        assert_eq!(pod_qos(&two), "Burstable");
    }
}
