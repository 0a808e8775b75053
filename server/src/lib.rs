//! kuberaft: a Kubernetes API server that is its own replicated database.
//!
//! This library is the whole server; the `kuberaft` binary only parses its command line. The
//! code map below says, for each module, its job, what it may import and what it must never
//! know. Imports follow the arrows of the diagram, never against them; `scheme`, `machinery`
//! and `config` are usable from everywhere. `tests/layers.rs` checks every rule on the source,
//! with no exception, and that no two modules import each other even indirectly.
//!
//! ```text
//! cli ─┐
//! server ──► filters ──► endpoints ──► registry ──► store ──► kuberaft_raft ──► kuberaft_storage
//!                │           │           │   ▲
//!                ▼           ▼           ▼   └─ controllers (run by server, act through registry)
//!          authentication, authorization ──► store      admission, kinds, apiextensions ◄┘
//! filters ──► audit ──► authentication        (kinds, apiextensions ──► registry: strategies)
//! aggregator, endpoints (connect) ──► proxy (HTTP forwarding, upgrades)
//! pki: certificates for server and cli; machinery, config: used by all of the above
//! scheme (the type data): below everything, even machinery
//! ```
//!
//! **`cli`** — the commands that are not the server (`cluster up`, `certs`, `endpoint status`,
//! `snapshot save|status|restore`) and the kubeconfig they write. Talks to replicas over their
//! public ports only (`cli::admin` reaches the admin service); `snapshot restore` writes new
//! data dirs through `kuberaft_raft::node::backup`, before any replica runs on them.
//! *Invariant:* never imports `server`'s internals beyond `config` and the shutdown signal.
//!
//! **`server`** — process assembly: binds the listeners, starts the Raft node, the store, the
//! registry and the controllers, builds the router with its filter chain in one function
//! (`server::router::router`), serves health and metrics, runs the backup schedule
//! (`server::backups`), and drains on shutdown. The only module that constructs and wires the
//! others.
//!
//! **`filters`** — tower layers every request passes before an endpoint, in the order
//! `server::router` lists them: request id and panic recovery, response sizes (counted after
//! gzip, for what the request metrics marked), compression, audit (when
//! configured; the filters inside it record into its per-request record), authentication
//! (`401`), impersonation, request info (the path parsed once into a `RequestInfo`; what
//! nothing serves is kept as `Unserved`, answered `404`/`405` by the endpoint once authorized),
//! API Priority and Fairness (`priority_and_fairness`: the request classified by
//! `flowcontrol`, a seat from its priority level, held until its response body is sent, else
//! kube's `429`) or, with it turned off, the in-flight limits (`max_in_flight`;
//! `read_vs_write` keeps kube's timing ratio histogram of either's seats), authorization (`403`), the aggregation proxy (`aggregator`, for APIServices with
//! a Service; connection upgrades are tunnelled to the backend).
//! *Invariant:* a filter decides on the request info and headers; it never reads the body or
//! calls a verb.
//!
//! **`endpoints`** — HTTP to verbs and back: content negotiation (one `Accept` parser for
//! resources, discovery and OpenAPI), bodies, the dispatch of a verb to the registry, response
//! rendering (JSON, YAML, protobuf, CBOR, Table, PartialObjectMetadata; large lists streamed
//! by `list_body`), watch streams, discovery and OpenAPI documents, and connect subresources
//! (`endpoints::connect`: options from the query, admitted as a `CONNECT`, the stream opened
//! or the request passed on where the strategy says). *Invariant:* knows axum and the registry; never sees `RaftNode`,
//! `kuberaft_proto` or stored bytes.
//!
//! **`registry`** — the generic store: one implementation of every verb (`read`, `create`,
//! `update` with the guaranteed-update loop and all patch types, `delete`, `scale`), and the
//! `Strategy` trait through which a type's behaviour reaches them (`registry::strategy::of`
//! reads the strategy attached to the type). *Invariant:* knows no HTTP (no axum types in a
//! verb's signature), never imports `kinds` or `apiextensions`, and names no kind.
//!
//! **`admission`** — the ordered plugins every write passes before it is stored: mutating ones
//! (`NamespaceLifecycle`, `LimitRanger`, `ServiceAccount`, `Priority`, `DefaultTolerationSeconds`,
//! `DefaultStorageClass`, the mutating webhooks), then validating ones (`LimitRanger`,
//! `ServiceAccount`, `PodSecurity`, `ValidatingAdmissionPolicy`, the validating webhooks;
//! warnings through `admission::warnings`, audit annotations through
//! `admission::audit_annotations`), then `ResourceQuota`, whose charge (`resource_quota::Charge`)
//! is a `store::Alongside` stored in the object's own transaction (a merge every replica's state
//! machine applies, `resource_quota::charge`), in kube-apiserver's order, run by the registry where
//! kube-apiserver runs its admission chain (a delete passes the mutating ones before the object
//! is read, the validating ones with it as the old object). The chain brings the watch cache up
//! to date with one read barrier per write, so configurations acknowledged anywhere apply at
//! once. The admission configuration file (`admission::configuration`) configures plugins
//! (PodSecurity's defaults and exemptions); CEL expressions get the `authorizer` variables
//! (`admission::authorizer`); a webhook or policy for an equivalent resource (another version,
//! or a built-in type stored as the same kind: events.k8s.io and core Events) sees the objects
//! converted through `admission::Versions`, which the registry implements.
//! *Invariant:* a plugin sees the request's attributes and the object, never HTTP or the
//! registry; it reads the store, never writes it.
//!
//! **`authentication`** — who a request is from: `UserInfo`, the x509 client-certificate
//! authenticator, the static token file, ServiceAccount tokens (issued and verified).
//! *Invariant:* reads the local watch cache only (does a token's ServiceAccount exist), never
//! writes, never sees a body.
//!
//! **`authorization`** — whether a user may: the RBAC authorizer answering from an in-memory
//! index of the watch cache's RBAC objects, escalation prevention for RBAC writes, the default
//! policy (data) and its reconcile, kube's `403` messages. *Invariant:* no HTTP, no registry;
//! a decision never waits on the store.
//!
//! **`audit`** — audit logging as kube-apiserver does it: the `audit.k8s.io/v1` policy and its
//! rules, each request's record (filled in by the filters, written per stage), the `Event`
//! JSON lines, the bounded buffer and its writer thread, the size-rotated log file, and the
//! webhook backend's `EventList` batches. *Invariant:* a request never waits on the disk, only
//! (when the buffer is full) on the writer, and never on the webhook; knows users, never the
//! registry, the store or an endpoint.
//!
//! **`pki`** — the cluster's certificates: making them (`rcgen`), checking them before a
//! replica serves, the rustls and tonic TLS configurations, the on-disk layout.
//! *Invariant:* no I/O but the PKI files; knows nothing of requests.
//!
//! **`kinds`** — per-kind behaviour, the only place that names a built-in kind: scheme
//! defaults, table printers, QoS, Service IP and port allocation, and the built-in kinds'
//! strategies — data for most (`kinds::strategy::Builtin`), a module each for Pods, Services,
//! Namespaces, Jobs and ReplicationControllers — attached to the served type table by
//! `kinds::strategy::registry`; a pod's `eviction` and `binding` subresources, which its
//! strategy serves, and where its streams lead (`kinds::connect`: the kubelet of its node);
//! where the proxies of pods, Services and nodes lead (`kinds::proxy`);
//! and the validation of built-in objects (`kinds::validation`: every type's
//! schema, kube's rules for the common types, PersistentVolume sources and updates,
//! certificate requests and cron schedules among them).
//!
//! **`apiextensions`** — custom resources: a CustomResourceDefinition turned into type-table
//! entries with the custom-resource strategy attached, the definitions' own strategy,
//! structural schemas (defaulting, pruning, validation), printer columns, and keeping the live
//! registry current.
//!
//! **`cel`** — the Common Expression Language of CRD validation rules and admission
//! policies: compile once (names checked, cost estimated from the variables' shapes), evaluate
//! with bound variables under a cost bound, kube's CEL libraries (`library`, with the `format`
//! and `semver` libraries in their own modules; the name formats reuse `machinery::meta`'s
//! validators; `authz`, the authorization library, asks an `Authorize` its caller binds).
//! *Invariant:* pure (no I/O,
//! no state but the shared environment); used by `apiextensions` and `admission`.
//!
//! **`webhook`** — reaching a webhook: a `clientConfig` (`url` or `service` resolved through
//! the cache's EndpointSlices, `caBundle` or the system's trust roots) and one HTTPS call, with clients kept for connection
//! reuse; used by `admission` (admission webhooks) and `apiextensions` (conversion webhooks).
//! *Invariant:* reads the watch cache only; knows no review type.
//!
//! **`controllers`** — leader-only reconcilers (namespace deletion, garbage collection,
//! deleted definitions' objects, ClusterRole aggregation, each namespace's `default`
//! ServiceAccount and `kube-root-ca.crt`, legacy ServiceAccount token Secrets, the system
//! namespaces and the `default/kubernetes` Service with its endpoints) that act through the
//! registry's verbs.
//!
//! **`flowcontrol`** — API Priority and Fairness as a mechanism: FlowSchema matching, the
//! priority levels' seats and fair queues (`queueset`), kube's default configuration as data
//! (`defaults`), kept equal to the stored FlowSchemas and PriorityLevelConfigurations through
//! the watch cache on every replica. *Invariant:* reads the watch cache, never writes (the
//! leader's `controllers::flowcontrol_configuration` writes the defaults and the
//! FlowSchemas' status); knows no HTTP, user type, registry or endpoint.
//!
//! **`store`** — the storage facade: objects as JSON over the replicated MVCC store, the watch
//! cache (`cacher`), its entries spliced from the stored JSON rather than decoded
//! (`stored_json`) and its watchers indexed by a field's value (`dispatch`), the decision to
//! serve a read from the cache or the store by its resourceVersion (`delegator`), the typed
//! read plans (`plans`), a Service reference resolved to an endpoint (`services`, for webhooks
//! and the aggregation proxy), writes that carry other
//! guarded keys in their transaction (`Alongside`, a quota's charge), and encryption at rest
//! (`encryption`: values sealed where they are encoded for a write, opened where they are
//! decoded, so nothing above the store ever sees ciphertext and apply never encrypts).
//! *Invariant:* the only module that imports `kuberaft_raft` and `kuberaft_proto`.
//!
//! **`machinery`** — pure functions over objects as `serde_json::Value`: metadata, field sets
//! and managed fields (server-side apply), strategic merge, the OpenAPI definitions of the
//! built-in types, schemas and field validation, selectors, the protobuf and CBOR codecs,
//! resource quantities and a pod's QoS class (`qos`), Kubernetes' version order (`version`),
//! Go's and kube's address rules (`net`: global unicast, `[scheme:]name[:port]`),
//! body decoding, and `ApiError` (the `Status` error type). *Invariant:* no I/O and no state;
//! imports only `scheme`.
//!
//! **`scheme`** — the type data, kube's scheme and REST mapper: every built-in type's group,
//! version, kind, plural, scope, short names, categories and subresources (`ResourceType`,
//! `Registry`), what a CustomResourceDefinition declares about a type it adds (`CustomType`),
//! and the set served right now (`LiveRegistry`), and the conversion of a type served in
//! several versions (`scheme::conversion`; the built-in pairs, such as HPA `autoscaling/v1` ⇄
//! `v2` and events.k8s.io ⇄ core Events, as data, which also say what each type is stored as). A type's behaviour is attached to it as opaque `Hooks` by the layer that
//! serves it. *Invariant:* imports nothing of the crate.
//!
//! **`aggregator`** — the aggregation layer (kube-aggregator): the APIServices that hand a
//! group-version to a Service, the proxy that forwards their requests with the caller's
//! front-proxy identity, their availability check, the discovery documents cached from
//! them, and kube-apiserver's group and version priorities (`priorities`), by which `/apis`
//! orders built-in, custom and aggregated groups alike. *Invariant:* reads the watch cache, never writes (the leader's controllers write
//! APIService status); knows no registry, filter or endpoint.
//!
//! **`proxy`** — carrying a request to another HTTP server and its answer back, streamed,
//! connection upgrades joined through (kube's upgrade-aware proxy): used by `aggregator` and by
//! `endpoints::connect` (a pod's `exec`, `attach`, `portforward`, to its kubelet, with the
//! kubelet client of `proxy::kubelet`; the proxies of pods, Services and nodes, with kube's
//! proxy transport there too, and `proxy::html` rewriting the links of the HTML pages they
//! pass back). *Invariant:* knows HTTP only: no store, user or
//! resource.
//!
//! **`config`** — the replica's config file (`ServeConfig`), used by `server`, `cli` and by the
//! tests and the chaos harness to write configs.
//!
//! `docs/architecture.md` walks a create, a watch and a list through these layers and shows how to add
//! a kind and a filter; `tests/layers.rs` checks the rules on the source.

pub mod admission;
pub mod aggregator;
pub mod apiextensions;
pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod cel;
pub mod cli;
pub mod config;
pub mod controllers;
pub mod endpoints;
pub mod filters;
pub mod flowcontrol;
pub mod kinds;
pub mod machinery;
pub mod pki;
pub mod proxy;
pub mod registry;
pub mod scheme;
pub mod server;
pub mod store;
pub mod webhook;
