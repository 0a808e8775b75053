//! CEL on a real three-replica cluster, driven by kubectl and plain HTTP as the admin: a
//! CustomResourceDefinition's `x-kubernetes-validations` refuse objects (with `fieldPath`,
//! `message`, `messageExpression`, a transition rule that keeps a field immutable), a rule too
//! expensive for kube's budget is refused when the definition is written, and a
//! ValidatingAdmissionPolicy with a ConfigMap as params denies writes through a `Deny`
//! binding while a `Warn` binding's warning reaches kubectl — on every replica, as soon as the
//! policy's write is acknowledged; a policy asks the authorizer what the request's user and a
//! service account may do, as users signed by the cluster CA, and one written for another
//! version sees the objects converted to it. Rules also use kube's `format`, `semver` and ip
//! libraries, refusing objects with the libraries' messages.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::eventually;
use support::kube::Kube;

/// A namespaced CustomResourceDefinition `<plural>.cel.example.com` of `kind`, version `v1`,
/// whose `spec` has the schema `spec` (YAML indented for its place).
fn definition(plural: &str, kind: &str, spec: &str) -> String {
    let singular = kind.to_lowercase();
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.cel.example.com
spec:
  group: cel.example.com
  scope: Namespaced
  names: {{plural: {plural}, singular: {singular}, kind: {kind}}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
{spec}"
    )
}

const WIDGETS: &str = r#"            type: object
            x-kubernetes-validations:
            - rule: "self.replicas <= self.maxReplicas"
              message: "must be less than maxReplicas"
              fieldPath: ".replicas"
            - rule: "self.tier in ['gold', 'silver']"
              messageExpression: "'tier ' + self.tier + ' is not offered'"
            properties:
              replicas: {type: integer}
              maxReplicas: {type: integer}
              tier: {type: string, maxLength: 16}
              image:
                type: string
                x-kubernetes-validations:
                - rule: "self == oldSelf"
                  message: "image is immutable"
"#;

fn widget(name: &str, replicas: i64, tier: &str, image: &str) -> String {
    format!(
        "apiVersion: cel.example.com/v1
kind: Widget
metadata:
  name: {name}
  namespace: default
spec:
  replicas: {replicas}
  maxReplicas: 3
  tier: {tier}
  image: {image}
"
    )
}

const GADGETS: &str = r#"            type: object
            properties:
              names:
                type: array
                items: {type: string}
                x-kubernetes-validations:
                - rule: "self.all(a, self.exists_one(b, a == b))"
                  message: "names must be unique"
"#;

const RELEASES: &str = r#"            type: object
            x-kubernetes-validations:
            - rule: "!format.dns1123Label().validate(self.host).hasValue()"
              messageExpression: "format.dns1123Label().validate(self.host).value().join(', ')"
              fieldPath: ".host"
            - rule: "isSemver(self.version, true) && semver(self.version, true).isGreaterThan(semver(self.minVersion))"
              messageExpression: "'version ' + self.version + ' is not a semantic version above ' + self.minVersion"
            - rule: "!has(self.address) || (isIP(self.address) && string(ip(self.address)) == self.address)"
              message: "address must be an IP address in canonical form"
            properties:
              host: {type: string, maxLength: 80}
              version: {type: string, maxLength: 32}
              minVersion: {type: string, maxLength: 32}
              address: {type: string, maxLength: 64}
"#;

fn release(name: &str, host: &str, version: &str, address: &str) -> String {
    format!(
        "apiVersion: cel.example.com/v1
kind: Release
metadata:
  name: {name}
  namespace: default
spec:
  host: {host:?}
  version: {version:?}
  minVersion: 1.0.0
  address: {address:?}
"
    )
}

const DNS_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_rules_use_kubes_format_semver_and_ip_libraries() {
    let k = Kube::start().await;
    let crd = k.manifest("releases.yaml", &definition("releases", "Release", RELEASES));
    k.ok("node-1", &["apply", "-f", &crd]);

    // A DNS label host, a version normalized from `v1.2` above 1.0.0, a canonical address.
    let good = k.manifest("good.yaml", &release("r1", "web-1", "v1.2", "2001:db8::1"));
    assert!(k
        .ok("node-2", &["apply", "-f", &good])
        .contains("release.cel.example.com/r1 created"));

    // The format's messages, joined by the messageExpression, on the field the rule names.
    let bad_host = k.manifest("bad-host.yaml", &release("r2", "Web_1", "1.2.3", "10.0.0.1"));
    let (ok, _, err) = k.kubectl("node-3", &["apply", "-f", &bad_host]);
    assert!(!ok, "created with a host that is not a DNS label");
    assert!(
        err.contains(&format!("spec.host: Invalid value: {DNS_LABEL}")),
        "{err}"
    );
    let long_host = "A".repeat(64);
    let long = k.manifest("long-host.yaml", &release("r3", &long_host, "1.2.3", "10.0.0.1"));
    let (ok, _, err) = k.kubectl("node-1", &["apply", "-f", &long]);
    assert!(!ok, "created with a long host");
    assert!(
        err.contains(&format!(
            "spec.host: Invalid value: must be no more than 63 characters, {DNS_LABEL}"
        )),
        "{err}"
    );

    // Versions: not semantic even normalized, and not above the minimum.
    for (name, version) in [("r4", "1.2.3.4"), ("r5", "v0.9")] {
        let bad = k.manifest("bad-version.yaml", &release(name, "web", version, "10.0.0.1"));
        let (ok, _, err) = k.kubectl("node-2", &["apply", "-f", &bad]);
        assert!(!ok, "created with version {version}");
        assert!(
            err.contains(&format!(
                "spec: Invalid value: version {version} is not a semantic version above 1.0.0"
            )),
            "{err}"
        );
    }

    // A version the library cannot parse is an evaluation error, with blang's message.
    let (ok, _, err) = k.kubectl(
        "node-1",
        &[
            "patch",
            "release",
            "r1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"minVersion":"1.0"}}"#,
        ],
    );
    assert!(!ok, "patched to an unparsable minimum");
    assert!(
        err.contains(r#"spec: Invalid value: "object": No Major.Minor.Patch elements found evaluating rule: isSemver(self.version, true)"#),
        "{err}"
    );

    // string(ip(...)) is the canonical form: an address written otherwise is refused.
    let loud = k.manifest("loud.yaml", &release("r6", "web", "2.0.0", "2001:DB8::1"));
    let (ok, _, err) = k.kubectl("node-3", &["apply", "-f", &loud]);
    assert!(!ok, "created with a non-canonical address");
    assert!(
        err.contains("spec: Invalid value: address must be an IP address in canonical form"),
        "{err}"
    );

    // The good object was kept, the refused ones never were, on every replica.
    for node in ["node-1", "node-2", "node-3"] {
        let names = k.ok(node, &["get", "releases", "-o", "name"]);
        assert_eq!(names.trim(), "release.cel.example.com/r1", "{node}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_validation_rules_refuse_objects_with_kubes_messages() {
    let k = Kube::start().await;
    let crd = k.manifest("widgets.yaml", &definition("widgets", "Widget", WIDGETS));
    k.ok("node-1", &["apply", "-f", &crd]);

    let good = k.manifest("good.yaml", &widget("w1", 2, "gold", "web:1"));
    assert!(k
        .ok("node-2", &["apply", "-f", &good])
        .contains("widget.cel.example.com/w1 created"));

    // A rule on `spec` reports on the field its fieldPath names, with its message.
    let over = k.manifest("over.yaml", &widget("w2", 5, "gold", "web:1"));
    let (ok, _, err) = k.kubectl("node-3", &["apply", "-f", &over]);
    assert!(!ok, "created over the limit");
    assert!(
        err.contains("spec.replicas: Invalid value: must be less than maxReplicas"),
        "{err}"
    );

    // messageExpression words the failure from the object.
    let bronze = k.manifest("bronze.yaml", &widget("w3", 1, "bronze", "web:1"));
    let (ok, _, err) = k.kubectl("node-1", &["apply", "-f", &bronze]);
    assert!(!ok, "created with an unknown tier");
    assert!(
        err.contains("spec: Invalid value: tier bronze is not offered"),
        "{err}"
    );

    // The transition rule keeps the image as it was; other fields still change.
    let (ok, _, err) = k.kubectl(
        "node-2",
        &[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"image":"web:2"}}"#,
        ],
    );
    assert!(!ok, "the image changed");
    assert!(
        err.contains(r#"spec.image: Invalid value: "web:2": image is immutable"#),
        "{err}"
    );
    k.ok(
        "node-3",
        &[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":3}}"#,
        ],
    );
    let w1 = k.json("node-1", &["get", "widget", "w1"]);
    assert_eq!(w1["spec"]["replicas"], 3);
    assert_eq!(w1["spec"]["image"], "web:1");

    // Over HTTP: a 422 whose causes name the fields, as kube-apiserver's.
    let body: Value = serde_json::json!({"apiVersion": "cel.example.com/v1", "kind": "Widget",
        "metadata": {"name": "w4"}, "spec": {"replicas": 9, "maxReplicas": 3, "tier": "iron", "image": "x"}});
    let (code, status) = k
        .send(
            reqwest::Method::POST,
            2,
            "/apis/cel.example.com/v1/namespaces/default/widgets",
            Some(&body),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "Widget.cel.example.com \"w4\" is invalid: [spec.replicas: Invalid value: must be less than maxReplicas, spec: Invalid value: tier iron is not offered]"
    );
    assert_eq!(status["details"]["causes"][0]["field"], "spec.replicas");
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueInvalid");

    // A rule that would cost too much is refused with the definition.
    let gadgets = k.manifest("gadgets.yaml", &definition("gadgets", "Gadget", GADGETS));
    let (ok, _, err) = k.kubectl("node-2", &["apply", "-f", &gadgets]);
    assert!(!ok, "an unbounded quadratic rule was accepted");
    assert!(
        err.contains("spec.validation.openAPIV3Schema.properties[spec].properties[names].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
        "{err}"
    );
    // Bounded, the same rule is fine.
    let bounded = GADGETS.replace(
        "items: {type: string}",
        "maxItems: 20\n                items: {type: string, maxLength: 32}",
    );
    let bounded = k.manifest("gadgets-bounded.yaml", &definition("gadgets", "Gadget", &bounded));
    k.ok("node-2", &["apply", "-f", &bounded]);
    let dup = k.manifest(
        "dup.yaml",
        "apiVersion: cel.example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: default}\nspec: {names: [a, b, a]}\n",
    );
    let (ok, _, err) = k.kubectl("node-3", &["apply", "-f", &dup]);
    assert!(!ok, "duplicate names were accepted");
    assert!(
        err.contains("spec.names: Invalid value: names must be unique"),
        "{err}"
    );
}

const PARAMS: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: vap
  labels: {env: test}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: limits
  namespace: vap
data:
  maxReplicas: \"3\"
";

const POLICIES: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-limit
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: \"object.spec.replicas <= int(params.data.maxReplicas)\"
    messageExpression: \"'replicas must be at most ' + params.data.maxReplicas\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replica-limit-deny
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef: {name: limits, namespace: vap, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector:
      matchLabels: {env: test}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: no-latest
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  variables:
  - name: images
    expression: \"object.spec.template.spec.containers.map(c, c.image)\"
  validations:
  - expression: \"variables.images.all(i, !i.endsWith(':latest'))\"
    message: images must not use the latest tag
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: no-latest-warn
spec:
  policyName: no-latest
  validationActions: [Warn]
";

/// A policy that asks the authorizer: only a user who may list Secrets in a namespace may
/// create ConfigMaps there, and a service account the policy names must be able to read them.
const AUTHZ_POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: secret-readers
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ['']
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  validations:
  - expression: \"authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('list').allowed()\"
    message: only users who may list secrets can create configmaps here
  - expression: \"authorizer.requestResource.check('create').allowed() && !authorizer.requestResource.check('create').errored()\"
    message: the request's own resource is not allowed
  - expression: \"authorizer.serviceAccount(object.metadata.namespace, 'auditor').group('').resource('configmaps').namespace(object.metadata.namespace).check('get').allowed()\"
    messageExpression: \"'the auditor may not read configmaps in ' + object.metadata.namespace\"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: secret-readers
spec:
  policyName: secret-readers
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {authz: test}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_ask_the_authorizer_for_the_user_and_for_service_accounts() {
    let k = Kube::start().await;
    // Everyone may create ConfigMaps in `authz`, only bob may list Secrets there; the
    // `auditor` service account may read ConfigMaps there, not in `authz-2`.
    for ns in ["authz", "authz-2"] {
        k.ok("node-1", &["create", "namespace", ns]);
        k.ok("node-1", &["label", "namespace", ns, "authz=test"]);
    }
    for (role, verb, resource, subjects) in [
        (
            "writer",
            "create",
            "configmaps",
            &["--user=alice", "--user=bob"][..],
        ),
        ("secret-lister", "list", "secrets", &["--user=bob"][..]),
        (
            "reader",
            "get",
            "configmaps",
            &["--serviceaccount=authz:auditor"][..],
        ),
    ] {
        let (verb, resource) = (format!("--verb={verb}"), format!("--resource={resource}"));
        k.ok(
            "node-1",
            &["-n", "authz", "create", "role", role, &verb, &resource],
        );
        let role_ref = format!("--role={role}");
        let mut bind = vec!["-n", "authz", "create", "rolebinding", role, &role_ref];
        bind.extend(subjects);
        k.ok("node-1", &bind);
    }
    let policy = k.manifest("policy.yaml", AUTHZ_POLICY);
    k.ok("node-1", &["apply", "-f", &policy]);
    let alice = k.kubeconfig_for("alice", &[]);
    let bob = k.kubeconfig_for("bob", &[]);

    // alice may create ConfigMaps but not list Secrets: refused, through every replica.
    for node in 0..3 {
        let name = format!("from-alice-{node}");
        let (ok, _, err) = k.kubectl_with(&alice, node, &["create", "configmap", &name, "-n", "authz"]);
        assert!(!ok, "alice created a configmap through replica {node}");
        assert!(
            err.contains("ValidatingAdmissionPolicy 'secret-readers' with binding 'secret-readers' denied request: only users who may list secrets can create configmaps here"),
            "{err}"
        );
    }
    // bob may list Secrets there: allowed; so is the admin (system:masters).
    let (ok, _, err) = k.kubectl_with(&bob, 1, &["create", "configmap", "from-bob", "-n", "authz"]);
    assert!(ok, "{err}");
    k.ok("node-3", &["create", "configmap", "from-admin", "-n", "authz"]);
    // The service account named by the policy may not read ConfigMaps in authz-2.
    let (ok, _, err) = k.kubectl("node-2", &["create", "configmap", "elsewhere", "-n", "authz-2"]);
    assert!(!ok, "the service account check let it through");
    assert!(
        err.contains("denied request: the auditor may not read configmaps in authz-2"),
        "{err}"
    );
    // An RBAC change is seen by the next check: alice is granted the list, and may create.
    k.ok(
        "node-1",
        &[
            "create",
            "rolebinding",
            "alice-lists",
            "--role=secret-lister",
            "--user=alice",
            "-n",
            "authz",
        ],
    );
    eventually(Duration::from_secs(30), || async {
        match k.kubectl_with(&alice, 2, &["create", "configmap", "from-alice", "-n", "authz"]) {
            (true, out, _) => Ok(out),
            (false, _, err) => Err(err),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validating_admission_policies_deny_and_warn_on_every_replica() {
    let k = Kube::start().await;
    let params = k.manifest("params.yaml", PARAMS);
    k.ok("node-1", &["apply", "-f", &params]);
    // Before the policies, anything goes.
    k.ok(
        "node-2",
        &[
            "create",
            "deployment",
            "before",
            "--image=nginx:1.27",
            "--replicas=5",
            "-n",
            "vap",
        ],
    );
    let policies = k.manifest("policies.yaml", POLICIES);
    k.ok("node-1", &["apply", "-f", &policies]);

    // At once, on another replica: the Deny binding refuses, with the params' value.
    let (ok, _, err) = k.kubectl(
        "node-3",
        &[
            "create",
            "deployment",
            "big",
            "--image=nginx:1.27",
            "--replicas=5",
            "-n",
            "vap",
        ],
    );
    assert!(!ok, "a deployment over the limit was created");
    assert!(
        err.contains("ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-deny' denied request: replicas must be at most 3"),
        "{err}"
    );
    k.ok(
        "node-2",
        &[
            "create",
            "deployment",
            "small",
            "--image=nginx:1.27",
            "--replicas=2",
            "-n",
            "vap",
        ],
    );
    // Outside the selected namespaces the binding does not apply.
    k.ok(
        "node-3",
        &[
            "create",
            "deployment",
            "elsewhere",
            "--image=nginx:1.27",
            "--replicas=5",
            "-n",
            "default",
        ],
    );

    // The refusal over HTTP: kube's Forbidden wording with the validation's reason (Invalid).
    let body = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "huge"},
        "spec": {"replicas": 9, "selector": {"matchLabels": {"app": "huge"}},
            "template": {"metadata": {"labels": {"app": "huge"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}});
    let (code, status) = k
        .send(
            reqwest::Method::POST,
            1,
            "/apis/apps/v1/namespaces/vap/deployments",
            Some(&body),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    let message = "deployments.apps \"huge\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-deny' denied request: replicas must be at most 3";
    assert_eq!(status["message"], message);
    assert_eq!(
        status["details"]["causes"][0]["message"],
        message.split_once("forbidden: ").unwrap().1
    );

    // Changing the params changes the limit.
    k.ok(
        "node-1",
        &[
            "patch",
            "configmap",
            "limits",
            "-n",
            "vap",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"maxReplicas":"10"}}"#,
        ],
    );
    k.ok(
        "node-2",
        &[
            "patch",
            "deployment",
            "small",
            "-n",
            "vap",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":8}}"#,
        ],
    );

    // The Warn binding lets the write through with kube's warning, which kubectl prints.
    let (ok, _, err) = k.kubectl(
        "node-3",
        &[
            "create",
            "deployment",
            "latest",
            "--image=nginx:latest",
            "-n",
            "default",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("Warning: Validation failed for ValidatingAdmissionPolicy 'no-latest' with binding 'no-latest-warn': images must not use the latest tag"),
        "{err}"
    );
    let (ok, _, err) = k.kubectl(
        "node-3",
        &[
            "create",
            "deployment",
            "pinned",
            "--image=nginx:1.27",
            "-n",
            "default",
        ],
    );
    assert!(ok && !err.contains("Warning"), "{err}");

    // Without the params object the Deny binding refuses (parameterNotFoundAction: Deny).
    k.ok("node-1", &["delete", "configmap", "limits", "-n", "vap"]);
    let (ok, _, err) = k.kubectl(
        "node-2",
        &[
            "create",
            "deployment",
            "tiny",
            "--image=nginx:1.27",
            "--replicas=1",
            "-n",
            "vap",
        ],
    );
    assert!(!ok, "created without params");
    assert!(
        err.contains("ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-deny' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{err}"
    );

    // A policy whose expression does not compile is refused when it is written.
    let broken = POLICIES
        .split("---\n")
        .nth(2)
        .expect("the no-latest policy")
        .replace("no-latest", "broken")
        .replace("!i.endsWith(':latest')", "!i.endsWith(");
    let broken = k.manifest("broken.yaml", &broken);
    let (ok, _, err) = k.kubectl("node-1", &["apply", "-f", &broken]);
    assert!(!ok, "a policy that does not compile was stored");
    assert!(
        err.contains("spec.validations[0].expression: Invalid value: \"variables.images.all(i, !i.endsWith()\": compilation failed: ERROR: <input>:1:"),
        "{err}"
    );
}

/// A policy `name` for `autoscaling/v2` autoscalers with `match_policy` and `validations`
/// (YAML list items), and its `Deny` binding.
fn v2_policy(name: &str, match_policy: &str, validations: &str) -> String {
    policy_for(
        "{apiGroups: [autoscaling], apiVersions: [v2], operations: [CREATE], resources: [horizontalpodautoscalers]}",
        name,
        match_policy,
        validations,
    )
}

/// A policy `name` for the resources of `rule` with `match_policy` and `validations` (YAML
/// list items), and its `Deny` binding.
fn policy_for(rule: &str, name: &str, match_policy: &str, validations: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints:
    matchPolicy: {match_policy}
    resourceRules:
    - {rule}
  validations:
{validations}---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {name}}}
spec: {{policyName: {name}, validationActions: [Deny]}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_for_another_version_see_the_object_converted() {
    let k = Kube::start().await;
    // Equivalent (the default) sees a v1 write converted to v2; Exact does not see it.
    let equivalent = v2_policy(
        "utilization",
        "Equivalent",
        "  - expression: \"object.apiVersion == 'autoscaling/v2' && request.kind.version == 'v2' && request.requestKind.version == 'v1'\"
    message: not seen in v2
  - expression: \"object.spec.metrics.all(m, m.resource.target.averageUtilization <= 80)\"
    message: utilization above 80
",
    );
    let exact = v2_policy(
        "exact",
        "Exact",
        "  - {expression: 'false', message: an exact policy for v2 saw a v1 write}\n",
    );
    for (name, policy) in [("equivalent.yaml", equivalent), ("exact.yaml", exact)] {
        k.ok("node-1", &["apply", "-f", &k.manifest(name, &policy)]);
    }
    let hpa = |name: &str, target: i64| {
        serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"maxReplicas": 5, "targetCPUUtilizationPercentage": target,
                     "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}}})
        .to_string()
    };
    let hot = k.manifest("hot.json", &hpa("hot", 90));
    k.refused(
        "node-2",
        &["create", "-f", &hot],
        "ValidatingAdmissionPolicy 'utilization' with binding 'utilization' denied request: utilization above 80",
    );
    let (ok, _, err) = k.kubectl(
        "node-3",
        &["create", "-f", &k.manifest("cool.json", &hpa("cool", 70))],
    );
    assert!(ok, "{err}");
}

/// events.k8s.io Events are core Events in kube (kube's equivalent resources): a policy for
/// `events.k8s.io/v1 events` sees a core Event created with kubectl as an events.k8s.io/v1
/// Event (`note`, `request.kind` in events.k8s.io, `request.requestKind` in core) under
/// `Equivalent`, and not under `Exact`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_for_events_k8s_io_see_core_events_converted() {
    let k = Kube::start().await;
    let rule = "{apiGroups: [events.k8s.io], apiVersions: [v1], operations: [CREATE], resources: [events]}";
    let equivalent = policy_for(
        rule,
        "notes",
        "Equivalent",
        "  - expression: \"object.apiVersion == 'events.k8s.io/v1' && request.kind.group == 'events.k8s.io' && request.requestKind.group == '' && !has(object.message)\"
    message: not seen as an events.k8s.io Event
  - expression: \"object.note != 'forbidden'\"
    message: a forbidden note
",
    );
    let exact = policy_for(
        rule,
        "exact",
        "Exact",
        "  - {expression: 'false', message: an exact policy for events.k8s.io saw a core Event}\n",
    );
    for (name, policy) in [("notes.yaml", equivalent), ("exact.yaml", exact)] {
        k.ok("node-1", &["apply", "-f", &k.manifest(name, &policy)]);
    }
    let event = |name: &str, message: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
            "reason": "Tested", "message": message, "type": "Normal"})
        .to_string()
    };
    k.refused(
        "node-2",
        &[
            "create",
            "-f",
            &k.manifest("forbidden.json", &event("forbidden", "forbidden")),
        ],
        "ValidatingAdmissionPolicy 'notes' with binding 'notes' denied request: a forbidden note",
    );
    let (ok, _, err) = k.kubectl(
        "node-3",
        &[
            "create",
            "-f",
            &k.manifest("fine.json", &event("fine", "all good")),
        ],
    );
    assert!(ok, "{err}");
}
