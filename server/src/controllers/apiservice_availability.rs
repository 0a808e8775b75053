//! The availability of aggregated APIs (kube-aggregator's `APIServiceAvailability`
//! controller): the leader checks every APIService that names a Service
//! (`aggregator::availability`) after any change to APIServices, Services or endpoints and
//! every few seconds, and writes the verdict as its `Available` condition through the status
//! subresource. Local APIServices are `local_apiservices`' concern.

use std::sync::Arc;
use std::time::Duration;

use crate::aggregator::proxy::Aggregator;
use crate::aggregator::{availability, backends, GROUP, PLURAL};
use crate::machinery::errors::ApiResult;
use crate::machinery::field_validation::Decoded;
use crate::machinery::timestamp::now_rfc3339;
use crate::registry::options::WriteOptions;
use crate::registry::update;
use crate::scheme::LiveRegistry;
use crate::store::{keys, Store};

/// How often every backend is checked even when nothing changed.
const INTERVAL: Duration = Duration::from_secs(5);

/// One pass: each backend checked, its condition written when it changed.
async fn reconcile(store: &Store, live: &LiveRegistry, aggregator: &Aggregator) -> ApiResult<()> {
    let registry = live.current();
    for backend in backends(store.cache()) {
        let verdict = availability::check(aggregator, &backend).await;
        let key = keys::object(GROUP, PLURAL, None, &backend.name);
        let Some(current) = store.cache().get(&key).ok().flatten().map(|c| c.value()) else {
            continue;
        };
        let Some(status) = availability::status_with(&current, &verdict, &now_rfc3339()) else {
            continue;
        };
        let mut next = current;
        next["status"] = status;
        let mut req = super::request(&registry, (GROUP, PLURAL), None, Some(&backend.name))?;
        req.subresource = Some("status".into());
        let body = Decoded {
            value: next,
            duplicates: Vec::new(),
        };
        match update::update(store, &req, &WriteOptions::by("kube-apiserver"), body).await {
            Err(e) if !matches!(e.code, 404 | 409) => return Err(e),
            _ => tracing::info!(
                apiservice = backend.name,
                reason = verdict.reason,
                "availability written"
            ),
        }
    }
    Ok(())
}

/// Whether a change can change a verdict: APIServices, Services and their endpoints.
fn relevant(key: &str) -> bool {
    [
        (GROUP, PLURAL),
        ("", "services"),
        ("", "endpoints"),
        ("discovery.k8s.io", "endpointslices"),
    ]
    .iter()
    .any(|(group, plural)| key.starts_with(&keys::type_prefix(group, plural)))
}

/// Runs the controller while this replica leads.
pub fn spawn(store: Store, live: Arc<LiveRegistry>, aggregator: Arc<Aggregator>) {
    super::run_while_leader(store, "apiservice-availability", move |store| {
        let (live, aggregator) = (live.clone(), aggregator.clone());
        async move {
            let ticks = futures::stream::unfold(tokio::time::interval(INTERVAL), |mut tick| async move {
                tick.tick().await;
                Some(((), tick))
            });
            super::run_passes_also_on(&store, "apiservice-availability", relevant, ticks, || {
                let (store, live, aggregator) = (&store, &live, &aggregator);
                async move { reconcile(store, live, aggregator).await }
            })
            .await;
        }
    });
}
