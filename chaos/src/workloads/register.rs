//! CAS registers: each register is a ConfigMap whose `data.value` clients read (Most Recent)
//! and then replace with a PUT carrying the read's resourceVersion as precondition, plus blind
//! merge patches. Every written value is unique in the run, so the linearizability checker can
//! tell writes apart.

use serde_json::json;

use crate::api::{self, ApiClient, ApiError};
use crate::history::{Call, RegisterOp, RegisterRecord};
use crate::workloads::Ctx;

/// The value every register starts with.
pub const INITIAL: &str = "init";

/// The name of register `k`.
pub fn register_name(k: usize) -> String {
    format!("reg-{k}")
}

/// Creates the registers with [`INITIAL`] (an existing one is reset by the caller's fresh
/// cluster, so "already exists" is fine).
pub async fn create(client: &ApiClient, registers: usize) -> Result<(), ApiError> {
    for k in 0..registers {
        let r = client
            .create_configmap(json!({"name": register_name(k)}), json!({"value": INITIAL}))
            .await;
        match r {
            Err(e) if !e.is_conflict() => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// The register's value in a ConfigMap.
fn value_of(obj: &serde_json::Value) -> Option<String> {
    obj["data"]["value"].as_str().map(str::to_string)
}

/// One client of register `key` until the phase ends: read, then CAS (60%), blind write
/// (25%) or nothing.
pub async fn run(mut ctx: Ctx, name: String, key: String) {
    let mut seq = 0u64;
    while !ctx.pause(10, 60).await {
        let client = ctx.any_client();
        let start = ctx.clock.now();
        let read = client.get_configmap(&key).await;
        let call = Call::finish(&ctx.clock, client.replica, start, false, &read);
        let observed = read.as_ref().ok().map(|o| {
            (
                o.as_ref().and_then(value_of),
                o.as_ref().map(api::resource_version),
            )
        });
        ctx.recorder.lock().registers.push(RegisterRecord {
            client: name.clone(),
            op: RegisterOp::Read {
                key: key.clone(),
                value: observed.clone().and_then(|(v, _)| v),
            },
            call,
        });
        seq += 1;
        let value = format!("{name}-{seq}");
        let choice = ctx.rng.below(100);
        let client = ctx.any_client();
        let start = ctx.clock.now();
        let (op, result) = match (choice, observed) {
            (0..60, Some((Some(expected), Some(rv)))) => {
                let r = client
                    .update_configmap(&key, &rv.to_string(), json!({"value": value}))
                    .await;
                let op = RegisterOp::Cas {
                    key: key.clone(),
                    expected,
                    value,
                };
                (op, r.map(drop))
            }
            (60..85, _) => {
                let r = client.patch_configmap(&key, json!({"value": value})).await;
                let op = RegisterOp::Write {
                    key: key.clone(),
                    value,
                };
                (op, r.map(drop))
            }
            _ => continue,
        };
        let call = Call::finish(&ctx.clock, client.replica, start, true, &result);
        ctx.recorder.lock().registers.push(RegisterRecord {
            client: name.clone(),
            op,
            call,
        });
    }
}
