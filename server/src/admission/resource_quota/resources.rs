//! Resource lists (`spec.hard`, `status.used`, an object's usage): named quantities added,
//! compared and written back as kube writes them, so that `status.used` reads `1536Mi` and a
//! refusal names `requests.memory=512Mi` exactly as kube-apiserver's would.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::machinery::qos::{format_quantity, quantity_value};

/// One quantity: its value in billionths, and whether it is shown with binary suffixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Amount {
    /// The value, in billionths of the unit.
    pub value: i128,
    /// Whether it was written with a binary suffix (`Mi`), which decides how it is shown.
    pub binary: bool,
}

impl Amount {
    /// A whole count (`pods`, `count/configmaps`).
    pub fn count(n: i128) -> Amount {
        Amount {
            value: n.saturating_mul(1_000_000_000),
            binary: false,
        }
    }

    /// The quantity as kube writes it.
    pub fn shown(&self) -> String {
        format_quantity(self.value, self.binary)
    }

    /// `self + other`, shown as the first non-zero of the two (kube's `Quantity.Add`).
    pub fn plus(self, other: Amount) -> Amount {
        Amount {
            value: self.value.saturating_add(other.value),
            binary: if self.value == 0 {
                other.binary
            } else {
                self.binary
            },
        }
    }
}

/// Named quantities, in name order.
pub type Resources = BTreeMap<String, Amount>;

/// The resource list at `v` (`{"pods": "2", "requests.memory": "1Gi"}`); entries that are not
/// quantities are left out.
pub fn parse(v: &Value) -> Resources {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(name, q)| {
            let (value, binary) = quantity_value(q)?;
            Some((name.clone(), Amount { value, binary }))
        })
        .collect()
}

/// The list as JSON, each quantity as kube writes it.
pub fn to_json(r: &Resources) -> Value {
    Value::Object(
        r.iter()
            .map(|(name, a)| (name.clone(), Value::String(a.shown())))
            .collect::<Map<String, Value>>(),
    )
}

/// Adds `b` into `a`, name by name.
pub fn add(a: &mut Resources, b: &Resources) {
    for (name, amount) in b {
        let sum = a.get(name).copied().unwrap_or_default().plus(*amount);
        a.insert(name.clone(), sum);
    }
}

/// `a - b`, name by name over the names of `a`, never below zero (kube's
/// `SubtractWithNonNegativeResult`).
pub fn subtract_non_negative(a: &Resources, b: &Resources) -> Resources {
    a.iter()
        .map(|(name, x)| {
            let y = b.get(name).map_or(0, |y| y.value);
            (
                name.clone(),
                Amount {
                    value: (x.value - y).max(0),
                    binary: x.binary,
                },
            )
        })
        .collect()
}

/// The entries of `r` whose names are in `names`.
pub fn mask<'a>(r: &Resources, names: impl IntoIterator<Item = &'a String>) -> Resources {
    names
        .into_iter()
        .filter_map(|n| r.get(n).map(|a| (n.clone(), *a)))
        .collect()
}

/// The list as kube prints it in a refusal: `name=quantity` pairs in name order, by commas.
pub fn pretty(r: &Resources) -> String {
    r.iter()
        .map(|(name, a)| format!("{name}={}", a.shown()))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sums_are_shown_as_kube_shows_them() {
        let mut used = parse(&json!({"requests.memory": "0", "pods": "1"}));
        add(&mut used, &parse(&json!({"requests.memory": "512Mi", "pods": 1})));
        add(&mut used, &parse(&json!({"requests.memory": "1Gi"})));
        assert_eq!(to_json(&used), json!({"pods": "2", "requests.memory": "1536Mi"}));
        let cpu = parse(&json!({"cpu": "250m"}))["cpu"].plus(parse(&json!({"cpu": "0.75"}))["cpu"]);
        assert_eq!(cpu.shown(), "1");
        assert_eq!(pretty(&used), "pods=2,requests.memory=1536Mi");
    }

    #[test]
    fn a_delta_never_goes_below_zero() {
        let new = parse(&json!({"cpu": "1", "memory": "1Gi"}));
        let old = parse(&json!({"cpu": "2", "memory": "512Mi"}));
        assert_eq!(
            to_json(&subtract_non_negative(&new, &old)),
            json!({"cpu": "0", "memory": "512Mi"})
        );
    }
}
