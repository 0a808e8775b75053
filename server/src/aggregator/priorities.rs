//! The priorities of group-versions, which order `/apis` (kube-aggregator's
//! `groupPriorityMinimum` and `versionPriority`): kube-apiserver's table for its own
//! group-versions (`apiVersionPriorities`), one pair for every custom resource group-version,
//! and an aggregated APIService's own spec. Data, read by the local APIServices' controller
//! and by discovery.

/// kube-apiserver's priorities of its built-in group-versions: `(group, version,
/// groupPriorityMinimum, versionPriority)`; they order `/apis`.
pub const BUILTIN: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apiregistration.k8s.io", "v1", 18000, 15),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v1", 17500, 15),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("resource.k8s.io", "v1", 15900, 15),
];
/// The priorities kube gives the group-versions of custom resources.
pub const CUSTOM: (i64, i64) = (1000, 100);

/// The priorities of a built-in group-version, if kube-apiserver's table has it.
pub fn builtin(group: &str, version: &str) -> Option<(i64, i64)> {
    BUILTIN
        .iter()
        .find(|(g, v, _, _)| (*g, *v) == (group, version))
        .map(|(_, _, g, v)| (*g, *v))
}
