//! What aggregated APIs serve, for this replica's discovery: each available backend's
//! `APIResourceList` (its `/apis/<group>/<version>`) and, where it serves one, its OpenAPI v3
//! document of that group-version, fetched by the replica's own periodic refresh and kept
//! until the next one, as kube-aggregator's discovery manager and OpenAPI controller cache
//! them. Discovery and `/openapi/v3` are then answered from the cache without asking any
//! backend.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::machinery::version::version_priority;

use super::availability;
use super::proxy::Aggregator;
use super::{backends, Backend};

/// How often a replica refreshes what the backends serve.
pub const REFRESH: Duration = Duration::from_secs(10);
/// How long fetching a backend's OpenAPI document may take.
const OPENAPI_TIMEOUT: Duration = Duration::from_secs(10);

/// An aggregated group-version as discovery shows it.
#[derive(Debug, Clone)]
pub struct Served {
    /// The APIService.
    pub backend: Backend,
    /// Its `APIResourceList`.
    pub resources: Value,
    /// Its OpenAPI v3 document (`/openapi/v3/apis/<group>/<version>`), if it serves one.
    pub openapi_v3: Option<Value>,
    /// The `paths` and `definitions` of its Swagger 2.0 document (`/openapi/v2`), if it
    /// serves one.
    pub openapi_v2: Option<(Map<String, Value>, Map<String, Value>)>,
}

/// The cache: by APIService name.
#[derive(Debug, Default, Clone)]
pub struct Cache(Arc<RwLock<BTreeMap<String, Served>>>);

impl Cache {
    /// What is served now, ordered as kube orders aggregated groups and versions: by
    /// `groupPriorityMinimum` (highest first), then group name; within a group by
    /// `versionPriority` (highest first), then Kubernetes' version order (`v2`, `v1`,
    /// `v1beta1`, `v1alpha1`).
    pub fn served(&self) -> Vec<Served> {
        let map = match self.0.read() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut out: Vec<Served> = map.values().cloned().collect();
        out.sort_by(|a, b| {
            let (a, b) = (&a.backend, &b.backend);
            b.group_priority
                .cmp(&a.group_priority)
                .then_with(|| a.group.cmp(&b.group))
                .then_with(|| b.version_priority.cmp(&a.version_priority))
                .then_with(|| version_priority(&a.version).cmp(&version_priority(&b.version)))
        });
        out
    }

    fn replace(&self, next: BTreeMap<String, Served>) {
        match self.0.write() {
            Ok(mut m) => *m = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }
}

/// One refresh: every backend that is available and answers its discovery document.
pub async fn refresh(aggregator: &Aggregator, cache: &Cache) {
    let mut next = BTreeMap::new();
    for backend in backends(aggregator.cache()) {
        if !backend.available {
            continue;
        }
        let verdict = availability::check(aggregator, &backend).await;
        let Some(resources) = verdict.discovery else {
            continue;
        };
        let path = format!("/openapi/v3/apis/{}/{}", backend.group, backend.version);
        let openapi_v3 = aggregator.get_json(&backend, &path, OPENAPI_TIMEOUT).await.ok();
        let openapi_v2 = aggregator
            .get_json(&backend, "/openapi/v2", OPENAPI_TIMEOUT)
            .await
            .ok()
            .and_then(swagger_parts);
        next.insert(
            backend.name.clone(),
            Served {
                backend,
                resources,
                openapi_v3,
                openapi_v2,
            },
        );
    }
    cache.replace(next);
}

/// The `paths` and `definitions` of a Swagger 2.0 document (`None` for anything else).
fn swagger_parts(mut doc: Value) -> Option<(Map<String, Value>, Map<String, Value>)> {
    if doc["swagger"] != "2.0" {
        return None;
    }
    let mut take = |key: &str| match doc.get_mut(key).map(Value::take) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    Some((take("paths"), take("definitions")))
}

/// Refreshes the cache every [`REFRESH`] for as long as the replica runs.
pub fn spawn(aggregator: Arc<Aggregator>, cache: Cache) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(REFRESH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            refresh(&aggregator, &cache).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn served(group: &str, version: &str, group_priority: i64, version_priority: i64) -> (String, Served) {
        let apiservice = json!({"metadata": {"name": format!("{version}.{group}")},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority,
                "versionPriority": version_priority, "service": {"namespace": "ns", "name": "s"}}});
        let backend = Backend::of(&apiservice).expect("a backend");
        (
            backend.name.clone(),
            Served {
                backend,
                resources: json!({}),
                openapi_v3: None,
                openapi_v2: None,
            },
        )
    }

    #[test]
    fn groups_go_by_priority_and_versions_by_priority_then_kubernetes_order() {
        let cache = Cache::default();
        cache.replace(BTreeMap::from([
            served("b.io", "v1alpha1", 100, 10),
            served("b.io", "v1beta1", 100, 10),
            served("b.io", "v2", 100, 10),
            served("b.io", "v10", 100, 10),
            served("b.io", "v1", 100, 20),
            served("a.io", "v1", 50, 10),
            served("c.io", "v1", 100, 10),
        ]));
        let order: Vec<(String, String)> = cache
            .served()
            .into_iter()
            .map(|s| (s.backend.group, s.backend.version))
            .collect();
        let expected = [
            ("b.io", "v1"),
            ("b.io", "v10"),
            ("b.io", "v2"),
            ("b.io", "v1beta1"),
            ("b.io", "v1alpha1"),
            ("c.io", "v1"),
            ("a.io", "v1"),
        ];
        assert_eq!(
            order,
            expected.map(|(g, v)| (g.to_string(), v.to_string())).to_vec()
        );
    }
}
