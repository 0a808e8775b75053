//! Kubernetes' order of API versions (GA, then beta, then alpha, higher numbers first), by
//! which discovery lists a group's versions and picks its preferred one, for built-in,
//! custom and aggregated groups alike.

/// The sort key of a version in Kubernetes' order: GA before beta before alpha, higher
/// numbers first, then any other name alphabetically (`v2`, `v1`, `v1beta2`, `v1alpha1`, `foo`).
pub fn version_priority(name: &str) -> (u8, i64, i64, String) {
    let parsed = name.strip_prefix('v').and_then(|rest| {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let major: i64 = rest[..digits].parse().ok()?;
        match &rest[digits..] {
            "" => Some((0, major, 0)),
            tail => {
                let (level, minor) = tail
                    .strip_prefix("beta")
                    .map(|m| (1, m))
                    .or_else(|| tail.strip_prefix("alpha").map(|m| (2, m)))?;
                Some((level, major, minor.parse::<i64>().ok()?))
            }
        }
    });
    match parsed {
        Some((level, major, minor)) => (level, -major, -minor, String::new()),
        None => (3, 0, 0, name.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_the_kubernetes_way() {
        let mut names = vec![
            "v1alpha1", "foo", "v1", "v2beta1", "v1beta2", "v2", "v1beta1", "bar", "v10",
        ];
        names.sort_by_key(|n| version_priority(n));
        assert_eq!(
            names,
            ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "bar", "foo"]
        );
    }
}
