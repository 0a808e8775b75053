//! Security as a user meets it, on a real three-replica cluster: kubectl over HTTPS with
//! client certificates of the cluster CA, `auth whoami` and `auth can-i` telling the truth for
//! an admin, a namespaced editor, a viewer and anonymous requests, RBAC denials with
//! kube-apiserver's messages, escalation through Role and RoleBinding writes refused, bad
//! credentials answered `401`, static bearer tokens, the review APIs, and a peer of another CA
//! refused at the handshake. After every refusal the test checks that nothing was written.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::kube::Kube;
use support::{put, Options};

const T: Duration = Duration::from_secs(30);

/// The exact body kube-apiserver answers an unauthenticated request with.
const UNAUTHORIZED: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n";

fn ok(k: &Kube, args: &[&str]) -> String {
    k.ok("node-1", args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_whoami_and_can_i_tell_the_truth_for_every_kind_of_user() {
    let k = Kube::start().await;
    let whoami = ok(&k, &["auth", "whoami", "-o", "json"]);
    let me: Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(me["kind"], "SelfSubjectReview");
    assert_eq!(me["status"]["userInfo"]["username"], "kuberaft-admin");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );

    ok(&k, &["create", "namespace", "shop"]);
    ok(
        &k,
        &[
            "create",
            "rolebinding",
            "ed-edit",
            "--clusterrole=edit",
            "--user=ed",
            "-n",
            "shop",
        ],
    );
    ok(
        &k,
        &[
            "create",
            "rolebinding",
            "vi-view",
            "--clusterrole=view",
            "--user=vi",
            "-n",
            "shop",
        ],
    );
    let ed = k.kubeconfig_for("ed", &["staff"]);
    let vi = k.kubeconfig_for("vi", &[]);
    let admin = k.kubeconfig.clone();

    // The matrix, asked on each replica in turn: every replica decides from its own cache.
    let cases: &[(&std::path::Path, &[&str], bool)] = &[
        (&admin, &["delete", "nodes"], true),
        (&admin, &["create", "clusterrolebindings"], true),
        (&ed, &["create", "configmaps", "-n", "shop"], true),
        (&ed, &["delete", "deployments.apps", "-n", "shop"], true),
        (&ed, &["create", "configmaps", "-n", "default"], false),
        (&ed, &["create", "rolebindings", "-n", "shop"], false),
        (&ed, &["list", "nodes"], false),
        (&ed, &["create", "pods", "--subresource=exec", "-n", "shop"], true),
        (
            &ed,
            &["get", "services", "--subresource=proxy", "-n", "shop"],
            true,
        ),
        (
            &ed,
            &["create", "pods", "--subresource=portforward", "-n", "shop"],
            true,
        ),
        (&vi, &["get", "pods", "--subresource=log", "-n", "shop"], true),
        (
            &vi,
            &["create", "pods", "--subresource=exec", "-n", "shop"],
            false,
        ),
        (&vi, &["list", "configmaps", "-n", "shop"], true),
        (&vi, &["watch", "pods", "-n", "shop"], true),
        (&vi, &["create", "configmaps", "-n", "shop"], false),
        (&vi, &["get", "secrets", "-n", "shop"], false),
        (&vi, &["list", "configmaps", "-n", "default"], false),
    ];
    for (i, (kubeconfig, question, expected)) in cases.iter().enumerate() {
        let mut args = vec!["auth", "can-i"];
        args.extend_from_slice(question);
        support::eventually(T, || async {
            let (_, out, err) = k.kubectl_with(kubeconfig, i % 3, &args);
            let answer = out.trim() == "yes";
            if answer == *expected && (out.trim() == "yes" || out.trim() == "no") {
                Ok(())
            } else {
                Err(format!(
                    "{} can-i {question:?}: {out} {err}",
                    kubeconfig.display()
                ))
            }
        })
        .await;
    }

    // What can-i says is what a request gets.
    let (good, _, err) = k.kubectl_with(&vi, 1, &["get", "configmaps", "-n", "shop"]);
    assert!(good, "{err}");
    let (good, _, err) = k.kubectl_with(&vi, 2, &["create", "configmap", "nope", "-n", "shop"]);
    assert!(!good);
    assert!(
        err.contains(
            r#"configmaps is forbidden: User "vi" cannot create resource "configmaps" in API group "" in the namespace "shop""#
        ),
        "{err}"
    );
    let (good, _, err) = k.kubectl_with(&vi, 0, &["get", "secret", "s1", "-n", "shop"]);
    assert!(!good);
    assert!(
        err.contains(r#"secrets "s1" is forbidden: User "vi" cannot get resource "secrets" in API group "" in the namespace "shop""#),
        "{err}"
    );
    let (good, _, err) = k.kubectl_with(&ed, 0, &["get", "nodes"]);
    assert!(!good);
    assert!(
        err.contains(r#"nodes is forbidden: User "ed" cannot list resource "nodes" in API group "" at the cluster scope"#),
        "{err}"
    );
    let (_, out, _) = k.kubectl(
        "node-1",
        &[
            "get",
            "configmap",
            "nope",
            "-n",
            "shop",
            "--ignore-not-found",
            "-o",
            "name",
        ],
    );
    assert_eq!(out.trim(), "", "a refused create wrote nothing");
    let (good, _, err) = k.kubectl_with(&ed, 1, &["create", "configmap", "mine", "-n", "shop"]);
    assert!(good, "{err}");

    // Impersonation: the admin may act as vi (`kubectl --as`); vi may not act as the admin,
    // and the refused request does nothing.
    let (_, out, err) = k.kubectl(
        "node-2",
        &["auth", "can-i", "list", "configmaps", "-n", "shop", "--as", "vi"],
    );
    assert_eq!(out.trim(), "yes", "{err}");
    let (_, out, _) = k.kubectl(
        "node-2",
        &[
            "auth",
            "can-i",
            "create",
            "configmaps",
            "-n",
            "shop",
            "--as",
            "vi",
        ],
    );
    assert_eq!(out.trim(), "no");
    let (_, out, _) = k.kubectl(
        "node-3",
        &[
            "auth",
            "whoami",
            "--as",
            "vi",
            "--as-group",
            "auditors",
            "-o",
            "jsonpath={.status.userInfo.groups}",
        ],
    );
    assert_eq!(out.trim(), r#"["auditors","system:authenticated"]"#);
    let (good, _, err) = k.kubectl_with(
        &vi,
        0,
        &[
            "create",
            "configmap",
            "via-admin",
            "-n",
            "shop",
            "--as",
            "kuberaft-admin",
            "--as-group",
            "system:masters",
        ],
    );
    assert!(!good);
    assert!(
        err.contains(r#"users "kuberaft-admin" is forbidden: User "vi" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{err}"
    );
    let (_, out, _) = k.kubectl("node-1", &["get", "configmap", "-n", "shop", "-o", "name"]);
    assert!(!out.contains("via-admin"), "{out}");

    // `can-i --list` lists what RBAC grants the viewer in shop.
    let (good, list, err) = k.kubectl_with(&vi, 0, &["auth", "can-i", "--list", "-n", "shop"]);
    assert!(good, "{err}");
    let configmaps = list
        .lines()
        .find(|l| l.starts_with("configmaps "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(configmaps.contains("[get list watch]"), "{list}");
    assert!(
        list.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_writes_cannot_grant_what_the_writer_lacks() {
    let k = Kube::start().await;
    ok(&k, &["create", "namespace", "shop"]);
    // rw may write Roles and RoleBindings in shop, and holds nothing else.
    ok(
        &k,
        &[
            "create",
            "role",
            "rbac-writer",
            "-n",
            "shop",
            "--verb=create,get,list,update",
            "--resource=roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io",
        ],
    );
    ok(
        &k,
        &[
            "create",
            "rolebinding",
            "rw",
            "--role=rbac-writer",
            "--user=rw",
            "-n",
            "shop",
        ],
    );
    let rw = k.kubeconfig_for("rw", &[]);
    support::eventually(T, || async {
        let (_, out, _) = k.kubectl_with(&rw, 0, &["auth", "can-i", "create", "roles", "-n", "shop"]);
        if out.trim() == "yes" {
            Ok(())
        } else {
            Err(out)
        }
    })
    .await;

    // A Role with a permission rw does not hold.
    let (good, _, err) = k.kubectl_with(
        &rw,
        1,
        &[
            "create",
            "role",
            "secret-reader",
            "--verb=get",
            "--resource=secrets",
            "-n",
            "shop",
        ],
    );
    assert!(!good, "escalation through a Role was allowed");
    assert!(
        err.contains(r#"is attempting to grant RBAC permissions not currently held"#),
        "{err}"
    );
    // A RoleBinding to a role whose permissions rw does not hold.
    let (good, _, err) = k.kubectl_with(
        &rw,
        2,
        &[
            "create",
            "rolebinding",
            "rw-admin",
            "--clusterrole=admin",
            "--user=rw",
            "-n",
            "shop",
        ],
    );
    assert!(!good, "escalation through a RoleBinding was allowed");
    assert!(err.contains("forbidden"), "{err}");
    // A Role within what rw holds is fine.
    let (good, _, err) = k.kubectl_with(
        &rw,
        0,
        &[
            "create",
            "role",
            "role-lister",
            "--verb=list",
            "--resource=roles.rbac.authorization.k8s.io",
            "-n",
            "shop",
        ],
    );
    assert!(good, "{err}");
    // Nothing of the refused writes was stored.
    let roles = ok(&k, &["get", "roles,rolebindings", "-n", "shop", "-o", "name"]);
    assert!(
        !roles.contains("secret-reader") && !roles.contains("rw-admin"),
        "{roles}"
    );
    assert!(roles.contains("role-lister"), "{roles}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_and_bad_credentials_get_401_and_write_nothing() {
    let k = Kube::start_with(Options {
        token_file: Some("s3cret-token,tim,1001,\"ops,dev\"\n".into()),
        ..Options::default()
    })
    .await;
    let anonymous = k.cluster.http_builder().build().unwrap();
    for path in ["/livez", "/readyz", "/healthz", "/version"] {
        let r = anonymous.get(k.url(0, path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let cms = k.url(1, "/api/v1/namespaces/default/configmaps");
    for path in ["/api", "/apis", "/metrics", "/openapi/v2", "/api/v1/namespaces"] {
        let r = anonymous.get(k.url(0, path)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        assert_eq!(r.text().await.unwrap(), UNAUTHORIZED, "{path}");
    }

    // A client certificate of another CA, a self-signed one, an expired one of the right CA,
    // and bearer tokens that are unknown or malformed.
    let dir = tempfile::tempdir().unwrap();
    let other = support::make_pki(dir.path(), 0);
    let foreign = std::fs::read(other.user(support::ADMIN).0).unwrap();
    let foreign_key = std::fs::read(other.user(support::ADMIN).1).unwrap();
    let self_signed = kuberaft::pki::issue::ca("system:admin").unwrap();
    let expired = expired_client(&k, "kuberaft-admin", "system:masters");
    let identities = [
        ("another CA", [foreign, foreign_key].concat()),
        (
            "self-signed",
            format!("{}{}", self_signed.cert_pem, self_signed.key_pem).into_bytes(),
        ),
        ("expired", expired.into_bytes()),
    ];
    for (what, pem) in identities {
        let client = k
            .cluster
            .http_builder()
            .identity(reqwest::Identity::from_pem(&pem).unwrap())
            .build()
            .unwrap();
        let r = client
            .post(&cms)
            .json(&json!({"metadata": {"name": "intruder"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{what}");
        assert_eq!(r.text().await.unwrap(), UNAUTHORIZED, "{what}");
    }
    for header in [
        "Bearer wrong",
        "Bearer s3cret-token-x",
        "Basic dGltOnM=",
        "Bearer ",
    ] {
        let r = anonymous
            .post(&cms)
            .header("authorization", header)
            .json(&json!({"metadata": {"name": "intruder"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{header}");
    }
    let (code, _) = k
        .send(
            reqwest::Method::GET,
            0,
            "/api/v1/namespaces/default/configmaps/intruder",
            None,
        )
        .await;
    assert_eq!(code, 404, "a refused request wrote nothing");

    // The token file's user, through whoami's API and through TokenReview.
    let r = anonymous
        .post(k.url(2, "/apis/authentication.k8s.io/v1/selfsubjectreviews"))
        .header("authorization", "Bearer s3cret-token")
        .json(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let review: Value = r.json().await.unwrap();
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "tim", "uid": "1001", "groups": ["ops", "dev", "system:authenticated"]})
    );
    let (code, review) = token_review(&k, "s3cret-token").await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(review["status"]["authenticated"], true, "{review}");
    assert_eq!(review["status"]["user"]["username"], "tim", "{review}");
    let (_, review) = token_review(&k, "nope").await;
    assert_eq!(review["status"], json!({"user": {}}), "{review}");
    // A token user without bindings may ask about itself and nothing else.
    let r = anonymous
        .get(k.url(0, "/api/v1/namespaces/default/configmaps"))
        .header("authorization", "Bearer s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"tim\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}
"#
    );
    // What nothing serves is authorized first, as kube-apiserver does: the user without
    // bindings is refused for the path as named, and only the admin learns it is a 404.
    for (path, message) in [
        (
            "/api/v1/namespaces/default/nosuchresource",
            r#"nosuchresource is forbidden: User "tim" cannot list resource "nosuchresource" in API group "" in the namespace "default""#,
        ),
        (
            "/api/v1/namespaces/default/configmaps/kube-root-ca.crt/bogus",
            r#"configmaps "kube-root-ca.crt" is forbidden: User "tim" cannot get resource "configmaps/bogus" in API group "" in the namespace "default""#,
        ),
    ] {
        let r = anonymous
            .get(k.url(0, path))
            .header("authorization", "Bearer s3cret-token")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
        let status: Value = r.json().await.unwrap();
        assert_eq!(status["message"], message, "{status}");
        let (code, status) = k.send(reqwest::Method::GET, 0, path, None).await;
        assert_eq!(
            (code, &status["message"]),
            (404, &json!("the server could not find the requested resource")),
            "{status}"
        );
    }
}

/// Asks replica 0 (as the admin) who `token` is: (status code, TokenReview).
async fn token_review(k: &Kube, token: &str) -> (u16, Value) {
    let review =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    k.send(
        reqwest::Method::POST,
        0,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Some(&review),
    )
    .await
}

/// A Kv client of the replica at `addr` over mutual TLS with `tls`.
fn kv_over(
    addr: &str,
    tls: tonic::transport::ClientTlsConfig,
) -> kuberaft_proto::kv_client::KvClient<tonic::transport::Channel> {
    let channel = tonic::transport::Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect_lazy();
    kuberaft_proto::kv_client::KvClient::new(channel)
}

/// A client certificate of the cluster CA that expired yesterday.
fn expired_client(k: &Kube, user: &str, group: &str) -> String {
    use rcgen::{CertificateParams, DnType, Issuer, KeyPair};
    let ca_cert = std::fs::read_to_string(k.cluster.pki.ca_cert()).unwrap();
    let ca_key = KeyPair::from_pem(&std::fs::read_to_string(k.cluster.pki.ca_key()).unwrap()).unwrap();
    let issuer = Issuer::from_ca_cert_pem(&ca_cert, ca_key).unwrap();
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, user);
    p.distinguished_name.push(DnType::OrganizationName, group);
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::days(30);
    p.not_after = now - time::Duration::days(1);
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = p.signed_by(&key, &issuer).unwrap();
    format!("{}{}", cert.pem(), key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_of_another_ca_is_refused_at_the_handshake() {
    let mut k = Kube::start().await;
    let leader = k.cluster.wait_leader(T).await;
    // The admin's certificate (of the cluster CA) reaches the admin service.
    let mut kv = k.cluster.kv(leader).await;
    put(&mut kv, "/registry/test/ok", b"1").await.unwrap();
    // A certificate of another CA does not get past the handshake.
    let dir = tempfile::tempdir().unwrap();
    let other = support::make_pki(dir.path(), 1);
    let (cert, key) = other.user(support::ADMIN);
    let tls = kuberaft::pki::tls::peer_client(
        &k.cluster.ca_pem(),
        &std::fs::read_to_string(cert).unwrap(),
        &std::fs::read_to_string(key).unwrap(),
    );
    let mut intruder = kv_over(&k.cluster.replicas[leader].peer_addr, tls);
    let refused = put(&mut intruder, "/registry/test/intruder", b"1").await;
    assert!(refused.is_err(), "a peer of another CA was served");
    // Without a client certificate at all: refused too.
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(k.cluster.ca_pem()));
    let mut anonymous = kv_over(&k.cluster.replicas[leader].peer_addr, tls);
    assert!(put(&mut anonymous, "/registry/test/anonymous", b"1")
        .await
        .is_err());
    // A user's certificate of the right CA may not use the admin service (only replicas and
    // system:masters may).
    let (cert, key) = k.cluster.user_pem("alice", &["dev"]);
    let tls = kuberaft::pki::tls::peer_client(&k.cluster.ca_pem(), &cert, &key);
    let mut alice = kv_over(&k.cluster.replicas[leader].peer_addr, tls);
    let refused = put(&mut alice, "/registry/test/alice", b"1").await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains("alice"), "{refused:?}");
    // Nothing the intruders sent was written.
    let mut kv = k.cluster.kv(leader).await;
    for key in [
        "/registry/test/intruder",
        "/registry/test/anonymous",
        "/registry/test/alice",
    ] {
        assert_eq!(support::get(&mut kv, key, 0, false).await.unwrap(), None, "{key}");
    }
    assert_eq!(
        support::get(&mut kv, "/registry/test/ok", 0, false)
            .await
            .unwrap(),
        Some(b"1".to_vec())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_tokens_work_until_their_account_or_pod_is_gone() {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::watcher;

    let k = Kube::start().await;
    ok(&k, &["create", "namespace", "shop"]);
    ok(&k, &["create", "serviceaccount", "robot", "-n", "shop"]);
    ok(
        &k,
        &[
            "create",
            "rolebinding",
            "robot-view",
            "--clusterrole=view",
            "--serviceaccount=shop:robot",
            "-n",
            "shop",
        ],
    );
    let token = ok(&k, &["create", "token", "robot", "-n", "shop"])
        .trim()
        .to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let anonymous = k.cluster.http_builder().http1_only().build().unwrap();
    let get = |node: usize, path: &str, token: &str| {
        anonymous
            .get(k.url(node, path))
            .header("authorization", format!("Bearer {token}"))
            .send()
    };

    // Who the token is, on every replica.
    for node in 0..3 {
        let r = anonymous
            .post(k.url(node, "/apis/authentication.k8s.io/v1/selfsubjectreviews"))
            .header("authorization", format!("Bearer {token}"))
            .json(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let me: Value = r.json().await.unwrap();
        assert_eq!(
            me["status"]["userInfo"]["username"],
            "system:serviceaccount:shop:robot"
        );
        assert_eq!(
            me["status"]["userInfo"]["groups"],
            json!([
                "system:serviceaccounts",
                "system:serviceaccounts:shop",
                "system:authenticated"
            ])
        );
    }
    let r = get(1, "/api/v1/namespaces/shop/configmaps", &token)
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = get(2, "/api/v1/namespaces/default/configmaps", &token)
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains(
        r#"User \"system:serviceaccount:shop:robot\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""#
    ));

    // kube-rs as the ServiceAccount, TLS verified against the cluster CA: a watcher limited to
    // its namespace sees a write the admin makes there.
    let mut config = kube::Config::new(k.url(0, "").parse().unwrap());
    {
        use rustls_pki_types::pem::PemObject;
        let ca = rustls_pki_types::CertificateDer::from_pem_slice(k.cluster.ca_pem().as_bytes()).unwrap();
        config.root_cert = Some(vec![ca.to_vec()]);
    }
    config.auth_info.token = Some(token.clone().into());
    let client = kube::Client::try_from(config).unwrap();
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "shop");
    let mut events = watcher::watcher(cms, watcher::Config::default()).boxed();
    ok(&k, &["create", "configmap", "seen-by-robot", "-n", "shop"]);
    let seen = tokio::time::timeout(T, async {
        while let Some(e) = events.next().await {
            if let Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = e {
                if cm.metadata.name.as_deref() == Some("seen-by-robot") {
                    return true;
                }
            }
        }
        false
    })
    .await;
    assert_eq!(seen, Ok(true), "the ServiceAccount's watcher saw the write");
    let everywhere: kube::Api<ConfigMap> = kube::Api::all(client);
    let refused = everywhere.list(&Default::default()).await.unwrap_err();
    assert!(refused.to_string().contains("forbidden"), "{refused}");

    // The issuer's discovery documents, for the ServiceAccounts that verify tokens elsewhere.
    let r = get(0, "/.well-known/openid-configuration", &token).await.unwrap();
    assert_eq!(r.status(), 200);
    let doc: Value = r.json().await.unwrap();
    assert_eq!(doc["issuer"], "https://kubernetes.default.svc.cluster.local");
    let r = get(0, "/openid/v1/jwks", &token).await.unwrap();
    let jwks: Value = r.json().await.unwrap();
    assert_eq!(jwks["keys"][0]["kty"], "EC");
    assert_eq!(jwks["keys"][0]["alg"], "ES256");

    // Refusals: too short a lifetime, another audience, a token bound to a Pod once it is gone,
    // and every token once its ServiceAccount is deleted.
    let (good, _, err) = k.kubectl(
        "node-1",
        &["create", "token", "robot", "-n", "shop", "--duration", "5m"],
    );
    assert!(!good);
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );
    let other = ok(
        &k,
        &["create", "token", "robot", "-n", "shop", "--audience", "vault"],
    );
    let r = get(0, "/api/v1/namespaces/shop/configmaps", other.trim())
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "a token for another audience");
    ok(
        &k,
        &[
            "run",
            "worker",
            "-n",
            "shop",
            "--image",
            "busybox",
            "--restart=Never",
        ],
    );
    let bound = ok(
        &k,
        &[
            "create",
            "token",
            "robot",
            "-n",
            "shop",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "worker",
        ],
    );
    let bound = bound.trim().to_string();
    assert_eq!(
        get(1, "/api/v1/namespaces/shop/configmaps", &bound)
            .await
            .unwrap()
            .status(),
        200
    );
    ok(
        &k,
        &[
            "delete",
            "pod",
            "worker",
            "-n",
            "shop",
            "--grace-period=0",
            "--force",
        ],
    );
    support::eventually(T, || async {
        match get(1, "/api/v1/namespaces/shop/configmaps", &bound).await {
            Ok(r) if r.status() == 401 => Ok(()),
            Ok(r) => Err(format!("{}", r.status())),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert_eq!(
        get(1, "/api/v1/namespaces/shop/configmaps", &token)
            .await
            .unwrap()
            .status(),
        200
    );
    ok(&k, &["delete", "serviceaccount", "robot", "-n", "shop"]);
    support::eventually(T, || async {
        match get(2, "/api/v1/namespaces/shop/configmaps", &token).await {
            Ok(r) if r.status() == 401 => Ok(()),
            Ok(r) => Err(format!("{}", r.status())),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    let (good, _, err) = k.kubectl("node-1", &["create", "token", "robot", "-n", "shop"]);
    assert!(!good);
    assert!(err.contains(r#"serviceaccounts "robot" not found"#), "{err}");
}

/// The value stored under `key`, as replica 0's store holds it.
async fn raw(k: &Kube, key: &str) -> Vec<u8> {
    let mut kv = k.cluster.kv(0).await;
    support::get(&mut kv, key, 0, false)
        .await
        .unwrap()
        .expect("the key is stored")
}

/// Every file under `dir`, read whole.
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path, bytes));
            }
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Replaces the cluster's encryption config and restarts every replica, one at a time, each
/// serving again before the next stops (a rolling restart).
async fn roll_encryption_config(k: &mut Kube, yaml: &str) {
    std::fs::write(k.cluster.pki.encryption_config(), yaml).unwrap();
    for i in 0..k.cluster.replicas.len() {
        k.cluster.stop(i);
        k.cluster.restart(i);
        let url = k.url(i, "/readyz");
        let http = k.http.clone();
        support::eventually(T, || async {
            match http.get(&url).send().await {
                Ok(r) if r.status() == 200 => Ok(()),
                Ok(r) => Err(format!("{url}: {}", r.status())),
                Err(e) => Err(format!("{url}: {e}")),
            }
        })
        .await;
    }
}

fn aes_config(keys: &[(&str, &str)], identity: bool) -> String {
    let keys: String = keys
        .iter()
        .map(|(name, secret)| format!("      - name: {name}\n        secret: {secret}\n"))
        .collect();
    let identity = if identity { "  - identity: {}\n" } else { "" };
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aesgcm:\n      keys:\n{keys}{identity}"
    )
}

fn key_secret(config: &str, name: &str) -> String {
    let marker = format!("name: {name}\n");
    let after = &config[config.find(&marker).expect("the key is in the config") + marker.len()..];
    after
        .lines()
        .next()
        .and_then(|l| l.trim().strip_prefix("secret: "))
        .expect("the key's secret")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_encrypted_at_rest_and_their_key_rotates() {
    use base64::Engine;
    let mut k = Kube::start().await;
    const PLAIN: &str = "correct-horse-battery-staple";
    const CONTROL: &str = "a-configmap-value-stored-in-plaintext";
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    ok(
        &k,
        &[
            "create",
            "secret",
            "generic",
            "db",
            &format!("--from-literal=password={PLAIN}"),
        ],
    );
    ok(
        &k,
        &[
            "create",
            "configmap",
            "control",
            &format!("--from-literal=note={CONTROL}"),
        ],
    );
    let password =
        |k: &Kube, ctx: &str| k.ok(ctx, &["get", "secret", "db", "-o", "jsonpath={.data.password}"]);
    for ctx in ["node-1", "node-2", "node-3"] {
        assert_eq!(password(&k, ctx), b64(PLAIN), "{ctx} serves the Secret");
    }

    // The store holds ciphertext under kube's prefix for the key `cluster up` made; the
    // ConfigMap, which the config does not cover, is plaintext.
    let secret_key = "/registry/core/secrets/default/db";
    let stored = raw(&k, secret_key).await;
    assert!(
        stored.starts_with(b"k8s:enc:aesgcm:v1:key1:"),
        "{}",
        String::from_utf8_lossy(&stored)
    );
    assert!(!contains(&stored, PLAIN) && !contains(&stored, &b64(PLAIN)));
    assert!(contains(
        &raw(&k, "/registry/core/configmaps/default/control").await,
        CONTROL
    ));

    // On disk (Raft log, state machine, snapshots, on every replica): the Secret's value is
    // nowhere, the ConfigMap's is found (so the scan does read what the store writes).
    k.cluster.wait_converged(T).await;
    for r in &k.cluster.replicas {
        let data = r.config.parent().unwrap().join(format!("node-{}", r.id));
        let files = files_under(&data);
        assert!(!files.is_empty(), "{} has files", data.display());
        for (path, bytes) in &files {
            assert!(
                !contains(bytes, PLAIN) && !contains(bytes, &b64(PLAIN)),
                "{} holds the Secret's plaintext",
                path.display()
            );
        }
        assert!(
            files.iter().any(|(_, b)| contains(b, CONTROL)),
            "no file of {} holds the ConfigMap's plaintext",
            data.display()
        );
    }

    // Rotation as kube documents it: the new key added second everywhere, then made first,
    // then every Secret rewritten; the old key is removed last.
    let config = std::fs::read_to_string(k.cluster.pki.encryption_config()).unwrap();
    let key1 = key_secret(&config, "key1");
    let key2 = kuberaft::store::encryption::new_key_secret().unwrap();
    roll_encryption_config(&mut k, &aes_config(&[("key1", &key1), ("key2", &key2)], true)).await;
    roll_encryption_config(&mut k, &aes_config(&[("key2", &key2), ("key1", &key1)], true)).await;
    let all = ok(&k, &["get", "secrets", "-A", "-o", "json"]);
    let listed = k.manifest("all-secrets.json", &all);
    ok(&k, &["replace", "-f", &listed]);
    let stored = raw(&k, secret_key).await;
    assert!(
        stored.starts_with(b"k8s:enc:aesgcm:v1:key2:"),
        "{}",
        String::from_utf8_lossy(&stored)
    );
    roll_encryption_config(&mut k, &aes_config(&[("key2", &key2)], false)).await;
    for ctx in ["node-1", "node-2", "node-3"] {
        assert_eq!(
            password(&k, ctx),
            b64(PLAIN),
            "{ctx} serves the Secret after the rotation"
        );
    }

    // A replica whose config lacks the key reads the Secret as a corrupt object, and says
    // which key it would need; the value is untouched.
    let key9 = kuberaft::store::encryption::new_key_secret().unwrap();
    std::fs::write(
        k.cluster.pki.encryption_config(),
        aes_config(&[("key9", &key9)], false),
    )
    .unwrap();
    k.cluster.stop(2);
    k.cluster.restart(2);
    let url = k.url(2, "/api/v1/namespaces/default/secrets/db");
    let http = k.http.clone();
    let body: Value = support::eventually(T, || async {
        let r = http.get(&url).send().await.map_err(|e| e.to_string())?;
        match r.status().as_u16() {
            500 => r.json::<Value>().await.map_err(|e| e.to_string()),
            other => Err(format!("{other}")),
        }
    })
    .await;
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("Internal error occurred: StorageError: corrupt object, Code: 7, Key: /registry/core/secrets/default/db")
            && message.contains("\"key2\""),
        "{message}"
    );
    assert_eq!(password(&k, "node-1"), b64(PLAIN));
    assert!(raw(&k, secret_key).await.starts_with(b"k8s:enc:aesgcm:v1:key2:"));
}

/// With `encryptionConfigAutomaticReload`, every replica follows the encryption config file
/// as kube-apiserver's automatic reload does: a new first key seals the next writes without a
/// restart, an invalid file keeps the last good config, and each attempt is counted in kube's
/// series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_encryption_config_is_reloaded_without_a_restart() {
    let k = Kube::start_with(Options {
        encryption_reload: true,
        ..Options::default()
    })
    .await;
    ok(
        &k,
        &["create", "secret", "generic", "before", "--from-literal=a=1"],
    );
    assert!(raw(&k, "/registry/core/secrets/default/before")
        .await
        .starts_with(b"k8s:enc:aesgcm:v1:key1:"));
    let reloads = |status: &'static str| {
        let k = &k;
        async move {
            let mut counts = Vec::new();
            for node in 0..3 {
                let text = k
                    .http
                    .get(k.url(node, "/metrics"))
                    .send()
                    .await
                    .map_err(|e| e.to_string())?
                    .text()
                    .await
                    .map_err(|e| e.to_string())?;
                let count: f64 = text
                    .lines()
                    .filter(|l| {
                        l.starts_with("apiserver_encryption_config_controller_automatic_reloads_total{")
                            && l.contains(&format!("status=\"{status}\""))
                            && l.contains("apiserver_id_hash=\"sha256:")
                    })
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum();
                counts.push(count);
            }
            Ok::<_, String>(counts)
        }
    };

    // key2 first, key1 still there to read what it sealed: the next Secret is sealed with
    // key2 on whichever replica writes it, and the old one stays readable everywhere.
    let config = std::fs::read_to_string(k.cluster.pki.encryption_config()).unwrap();
    let key1 = key_secret(&config, "key1");
    let key2 = kuberaft::store::encryption::new_key_secret().unwrap();
    std::fs::write(
        k.cluster.pki.encryption_config(),
        aes_config(&[("key2", &key2), ("key1", &key1)], true),
    )
    .unwrap();
    support::eventually(T, || async {
        match reloads("success").await? {
            c if c.iter().all(|n| *n >= 1.0) => Ok(()),
            c => Err(format!("reloads per replica: {c:?}")),
        }
    })
    .await;
    for (i, ctx) in ["node-1", "node-2", "node-3"].iter().enumerate() {
        let name = format!("after-{i}");
        k.ok(ctx, &["create", "secret", "generic", &name, "--from-literal=a=2"]);
        let stored = raw(&k, &format!("/registry/core/secrets/default/{name}")).await;
        assert!(
            stored.starts_with(b"k8s:enc:aesgcm:v1:key2:"),
            "{ctx}: {}",
            String::from_utf8_lossy(&stored)
        );
        let before = k.ok(ctx, &["get", "secret", "before", "-o", "jsonpath={.data.a}"]);
        assert_eq!(before, "MQ==", "{ctx} reads what key1 sealed");
    }

    // A broken file is refused: the last good config stays in force.
    std::fs::write(
        k.cluster.pki.encryption_config(),
        "kind: NotAnEncryptionConfiguration\n",
    )
    .unwrap();
    support::eventually(T, || async {
        match reloads("failure").await? {
            c if c.iter().all(|n| *n >= 1.0) => Ok(()),
            c => Err(format!("failed reloads per replica: {c:?}")),
        }
    })
    .await;
    ok(
        &k,
        &["create", "secret", "generic", "still", "--from-literal=a=3"],
    );
    assert!(raw(&k, "/registry/core/secrets/default/still")
        .await
        .starts_with(b"k8s:enc:aesgcm:v1:key2:"));
    assert_eq!(
        k.ok("node-3", &["get", "secret", "before", "-o", "jsonpath={.data.a}"]),
        "MQ=="
    );

    // ResourceQuotas encrypted too: the state machine cannot compute a sealed quota's usage,
    // so charges fall back to writing the quota's new value conditioned on its revision, and
    // concurrent creates through every replica still never exceed it.
    let config = aes_config(&[("key2", &key2), ("key1", &key1)], true)
        .replace("resources: [secrets]", "resources: [secrets, resourcequotas]");
    std::fs::write(k.cluster.pki.encryption_config(), config).unwrap();
    support::eventually(T, || async {
        match reloads("success").await? {
            c if c.iter().all(|n| *n >= 2.0) => Ok(()),
            c => Err(format!("reloads per replica: {c:?}")),
        }
    })
    .await;
    ok(&k, &["create", "namespace", "sealed"]);
    ok(
        &k,
        &[
            "create",
            "quota",
            "objects",
            "-n",
            "sealed",
            "--hard=count/secrets=4",
        ],
    );
    let quota_key = "/registry/core/resourcequotas/sealed/objects";
    support::eventually(T, || async {
        let q = k.json("node-1", &["get", "quota", "objects", "-n", "sealed"]);
        if q["status"]["used"]["count/secrets"].is_string() {
            Ok(())
        } else {
            Err(format!("{q}"))
        }
    })
    .await;
    let creates = (0..12).map(|i| {
        let k = &k;
        async move {
            let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("s-{i}")}});
            k.send(
                reqwest::Method::POST,
                i % 3,
                "/api/v1/namespaces/sealed/secrets",
                Some(&body),
            )
            .await
        }
    });
    let outcomes = futures::future::join_all(creates).await;
    let created = outcomes.iter().filter(|(code, _)| *code == 201).count();
    let used: usize = k
        .ok(
            "node-2",
            &[
                "get",
                "quota",
                "objects",
                "-n",
                "sealed",
                "-o",
                "jsonpath={.status.used.count/secrets}",
            ],
        )
        .parse()
        .expect("a count");
    let stored = k
        .ok("node-2", &["get", "secrets", "-n", "sealed", "-o", "name"])
        .lines()
        .count();
    assert_eq!((created, stored, used), (4, 4, 4), "{outcomes:?}");
    assert!(
        outcomes.iter().all(|(code, body)| *code == 201
            || (*code == 403
                && body["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("exceeded quota: objects")))),
        "{outcomes:?}"
    );
    assert!(raw(&k, quota_key).await.starts_with(b"k8s:enc:aesgcm:v1:key2:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_restarted_with_another_clusters_certificates_is_refused_and_learns_nothing() {
    let mut k = Kube::start().await;
    ok(&k, &["create", "configmap", "before", "--from-literal=a=1"]);
    k.cluster.wait_converged(T).await;

    // Replica 3 restarted with its data but another cluster's CA and certificates (issued for
    // the same names and addresses).
    let other = support::make_pki(&k.cluster.dir.path().join("other-pki"), 3);
    k.cluster.stop(2);
    let path = k.cluster.replicas[2].config.clone();
    let mut config = kuberaft::config::ServeConfig::load(&path).unwrap();
    let files = other.replica("node-3");
    let security = config.security.as_mut().expect("a secure config");
    security.certificate_authority = other.ca_cert();
    security.serving_certificate = files.api_cert;
    security.serving_key = files.api_key;
    security.peer_certificate = files.peer_cert;
    security.peer_key = files.peer_key;
    std::fs::write(&path, config.to_yaml().unwrap()).unwrap();
    k.cluster.restart(2);

    // The cluster goes on without it: writes succeed through the other two.
    ok(&k, &["create", "configmap", "after", "--from-literal=a=2"]);
    let cluster_revision = k
        .cluster
        .status(0, false)
        .await
        .expect("replica 1 answers")
        .revision;

    // Its peers refuse it at the handshake and it refuses them: asked with its own CA's admin
    // certificate, it answers, but it neither receives the new write nor commits anything on
    // its own. (A replica that led before the restart still calls itself leader of its old
    // term, as openraft restores it; with no quorum it cannot commit, and linearizable reads
    // need a quorum too.)
    let (cert, key) = other.user(support::ADMIN);
    let tls = kuberaft::pki::tls::peer_client(
        &std::fs::read_to_string(other.ca_cert()).unwrap(),
        &std::fs::read_to_string(cert).unwrap(),
        &std::fs::read_to_string(key).unwrap(),
    );
    let stranger = kv_over(&k.cluster.replicas[2].peer_addr, tls);
    let ask = || {
        let mut stranger = stranger.clone();
        async move {
            stranger
                .status(kuberaft_proto::StatusRequest { with_hash: false })
                .await
                .map(|r| r.into_inner())
                .map_err(|e| e.to_string())
        }
    };
    let first = support::eventually(T, ask).await;
    // Long enough for several election timeouts and heartbeats.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = support::eventually(T, ask).await;
    assert!(
        later.revision < cluster_revision,
        "the stranger received writes: {} >= {cluster_revision}",
        later.revision
    );
    assert_eq!(
        (later.commit_index, later.revision),
        (first.commit_index, first.revision),
        "the stranger committed on its own"
    );
    let cluster = k.cluster.status(0, false).await.expect("replica 1 answers");
    assert!(
        cluster.has_leader && cluster.leader_id != 3,
        "the others lead themselves: {cluster:?} / stranger {later:?}"
    );
    // The cluster's own admin cannot reach it either: its CA is not the cluster's.
    let mut kv = k.cluster.kv(2).await;
    assert!(
        kv.status(kuberaft_proto::StatusRequest { with_hash: false })
            .await
            .is_err(),
        "the replica of another CA served the cluster's admin"
    );
    // And the rest of the cluster still has one leader and both objects.
    for node in ["node-1", "node-2"] {
        let names = k.ok(node, &["get", "configmap", "before", "after", "-o", "name"]);
        assert_eq!(names, "configmap/before\nconfigmap/after\n", "{node}");
    }
}
