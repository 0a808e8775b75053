//! What aggregated APIs serve, for this replica's discovery: each available backend's
//! `APIResourceList` (its `/apis/<group>/<version>`) and, where it serves one, its OpenAPI v3
//! document of that group-version, fetched by the replica's own periodic refresh and kept
//! until the next one, as kube-aggregator's discovery manager and OpenAPI controller cache
//! them. Discovery and `/openapi/v3` are then answered from the cache without asking any
//! backend.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;

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
}

/// The cache: by APIService name.
#[derive(Debug, Default, Clone)]
pub struct Cache(Arc<RwLock<BTreeMap<String, Served>>>);

impl Cache {
    /// What is served now, ordered as kube orders aggregated groups and versions: by
    /// `groupPriorityMinimum` (highest first), then group name; within a group by
    /// `versionPriority` (highest first), then version.
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
                .then_with(|| a.version.cmp(&b.version))
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
        next.insert(
            backend.name.clone(),
            Served {
                backend,
                resources,
                openapi_v3,
            },
        );
    }
    cache.replace(next);
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
