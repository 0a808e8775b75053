//! Create/delete churn: ConfigMaps created with `generateName` and deleted later, each
//! carrying a unique id in its data, so the durability checker can tell which create an object
//! came from even when the create's answer was lost.

use serde_json::json;

use crate::api;
use crate::history::{Call, ChurnRecord};
use crate::workloads::Ctx;

/// Name prefix of churn objects.
pub const PREFIX: &str = "churn-";

/// One churn client until the phase ends: create, and half of the time delete one of the
/// objects it created before.
pub async fn run(mut ctx: Ctx, name: String) {
    let mut live: Vec<(String, String)> = Vec::new();
    let mut seq = 0u64;
    while !ctx.pause(20, 120).await {
        seq += 1;
        let id = format!("{name}-{seq}");
        let client = ctx.any_client();
        let start = ctx.clock.now();
        let r = client
            .create_configmap(json!({"generateName": PREFIX}), json!({"id": id}))
            .await;
        let call = Call::finish(&ctx.clock, client.replica, start, true, &r);
        let created = r.ok().map(|o| api::name(&o));
        if let Some(n) = &created {
            live.push((id.clone(), n.clone()));
        }
        ctx.recorder.lock().churn.push(ChurnRecord {
            id,
            action: "create",
            name: created,
            call,
        });
        if live.is_empty() || ctx.rng.below(2) == 0 {
            continue;
        }
        let (id, obj) = live.swap_remove(ctx.rng.below(live.len() as u64) as usize);
        let client = ctx.any_client();
        let start = ctx.clock.now();
        let r = client.delete_configmap(&obj).await;
        let call = Call::finish(&ctx.clock, client.replica, start, true, &r);
        ctx.recorder.lock().churn.push(ChurnRecord {
            id,
            action: "delete",
            name: Some(obj),
            call,
        });
    }
}
