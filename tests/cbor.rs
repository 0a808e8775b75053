//! The CBOR encoding (`application/cbor`, `application/cbor-seq`, `application/apply-patch+cbor`)
//! against an independent implementation: `tests/python/cbor_e2e.py` encodes requests and
//! decodes answers with Python's `cbor2` on a real three-replica cluster with security on, and
//! checks Kubernetes' CBOR profile byte for byte (the self-described tag, byte strings, sorted
//! keys, definite lengths), create/get/list/update/apply/watch of a built-in type and a custom
//! resource, a Secret's raw bytes (tag 22), `Accept` q-values, CBOR `Status` errors, `415` for
//! patches other than apply, and the decoder's `400`s (duplicate keys, invalid UTF-8, NaN, deep
//! nesting, a length past the body). It runs under the latest client's virtualenv, which `./dev.sh test` gives `cbor2`.

mod support;

use support::kube::Kube;
use support::python::{client_versions, python_for, run_script};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cbor_requests_responses_and_watches_follow_kubes_profile() {
    let latest = *client_versions().last().expect("a client version");
    let python = python_for(latest);
    let k = Kube::start().await;
    let (ok, output) = run_script(&k, &python, "cbor_e2e.py", "cbor").await;
    assert!(
        ok,
        "cbor2 saw differences from Kubernetes' CBOR profile:\n{output}{}",
        k.cluster.log_tails(20)
    );
    assert!(output.contains("7 passed, 0 failed"), "{output}");
}
