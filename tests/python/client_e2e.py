"""The official Kubernetes Python client against a kuberaft cluster, used the way its users do.

tests/python_client.rs starts a three-replica cluster and runs this script once under each
client version of tests/python/clients (its own virtualenv), with the cluster's kubeconfig (one
context per replica, `node-1`..`node-3`). Each check below writes through one replica and reads
or watches through the others, and asserts what kube-apiserver answers: objects, resourceVersions,
generations, managedFields, error Status bodies and the order of watch events. Every check runs
(a failure does not hide the ones after it); the script exits 1 if any failed.

    python client_e2e.py KUBECONFIG PREFIX

PREFIX names this run's namespaces and cluster-scoped objects, so that runs share a cluster.
"""

import datetime
import functools
import json
import os
import sys
import tempfile
import threading
import time
import traceback

import kubernetes
from kubernetes import client, config, dynamic, utils, watch
from kubernetes.client.rest import ApiException
from kubernetes.informer import SharedInformer

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = []


def check(fn):
    """Registers a check; each gets its own namespace, PREFIX-<name>."""
    CHECKS.append(fn)
    return fn


class Cluster:
    """One API client per replica of the cluster, from the kubeconfig's contexts."""

    def __init__(self, kubeconfig, prefix):
        self.kubeconfig = kubeconfig
        self.prefix = prefix
        self.apis = [
            config.new_client_from_config(config_file=kubeconfig, context="node-%d" % i)
            for i in (1, 2, 3)
        ]

    def core(self, i):
        return client.CoreV1Api(self.apis[i])

    def apps(self, i):
        return client.AppsV1Api(self.apis[i])

    def namespace(self, name):
        """Creates the check's namespace through replica 0 and returns its name."""
        ns = "%s-%s" % (self.prefix, name.replace("_", "-"))
        self.core(0).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        return ns


def raw(api, obj):
    """An API model object as the JSON the server sent (camelCase keys)."""
    return api.sanitize_for_serialization(obj)


def api_error(code, fn, *args, **kwargs):
    """Calls fn, which must fail with HTTP `code`; returns the Status body it answered."""
    try:
        fn(*args, **kwargs)
    except ApiException as e:
        assert e.status == code, "expected %d, got %d: %s" % (code, e.status, e.body)
        return json.loads(e.body)
    except dynamic.exceptions.DynamicApiError as e:
        assert e.status == code, "expected %d, got %d: %s" % (code, e.status, e.body)
        return json.loads(e.body)
    raise AssertionError("expected HTTP %d, the call succeeded" % code)


def eq(actual, expected, what):
    assert actual == expected, "%s: expected %r, got %r" % (what, expected, actual)


def until(what, fn, timeout=20):
    """Polls fn until it returns a true value; fails saying `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.1)


def managers(obj):
    """(manager, operation) of each managedFields entry, in order."""
    return [(m["manager"], m["operation"]) for m in obj["metadata"].get("managedFields", [])]


def fields_of(obj, manager):
    """The fieldsV1 set that `manager` owns in `obj`."""
    for m in obj["metadata"].get("managedFields", []):
        if m["manager"] == manager:
            return m["fieldsV1"]
    raise AssertionError("no managedFields entry of %s in %r" % (manager, obj["metadata"]))


# -- CRUD ------------------------------------------------------------------------------------


@check
def crud_configmaps(c):
    ns = c.namespace("crud")
    core1, core2, core3 = c.core(0), c.core(1), c.core(2)
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="settings", labels={"app": "py"}),
        data={"color": "blue"},
    )
    created = core1.create_namespaced_config_map(ns, body)
    eq(created.data, {"color": "blue"}, "created data")
    eq(created.metadata.namespace, ns, "namespace")
    assert created.metadata.uid and created.metadata.resource_version, created.metadata
    assert isinstance(created.metadata.creation_timestamp, datetime.datetime), created.metadata

    read = core2.read_namespaced_config_map("settings", ns)
    eq(read.metadata.resource_version, created.metadata.resource_version, "resourceVersion read back")
    eq(read.metadata.uid, created.metadata.uid, "uid read back")

    status = api_error(409, core3.create_namespaced_config_map, ns, body)
    eq(
        status,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'configmaps "settings" already exists',
            "reason": "AlreadyExists",
            "details": {"name": "settings", "kind": "configmaps"},
            "code": 409,
        },
        "create of an existing name",
    )

    read.data["color"] = "green"
    replaced = core3.replace_namespaced_config_map("settings", ns, read)
    eq(replaced.data, {"color": "green"}, "replaced data")
    assert replaced.metadata.resource_version != created.metadata.resource_version, replaced.metadata

    read.data["color"] = "red"  # still the old resourceVersion
    status = api_error(409, core1.replace_namespaced_config_map, "settings", ns, read)
    eq(status["reason"], "Conflict", "stale replace reason")
    eq(
        status["message"],
        'Operation cannot be fulfilled on configmaps "settings": the object has been modified; '
        "please apply your changes to the latest version and try again",
        "stale replace message",
    )
    eq(core2.read_namespaced_config_map("settings", ns).data, {"color": "green"}, "after the stale replace")

    listed = core2.list_namespaced_config_map(ns, label_selector="app=py")
    eq([i.metadata.name for i in listed.items], ["settings"], "list by label")
    eq(listed.items[0].metadata.resource_version, replaced.metadata.resource_version, "listed resourceVersion")
    assert listed.metadata.resource_version, listed.metadata

    # Dry run, generateName, set-based selectors and an invalid name.
    dry = core2.create_namespaced_config_map(ns, cm("dry", labels={"app": "dry"}), dry_run="All")
    eq((dry.metadata.name, dry.metadata.uid is not None), ("dry", True), "dry-run answer")
    api_error(404, core3.read_namespaced_config_map, "dry", ns)
    generated = core3.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="gen-", labels={"app": "gen"}))
    )
    assert generated.metadata.name.startswith("gen-") and len(generated.metadata.name) == 9, generated.metadata.name
    picked = core1.list_namespaced_config_map(ns, label_selector="app in (py,gen),app!=dry")
    eq(sorted(i.metadata.name for i in picked.items), sorted(["settings", generated.metadata.name]), "set-based selector")
    status = api_error(422, core1.create_namespaced_config_map, ns, cm("Bad_Name"))
    eq((status["reason"], status["details"]["causes"][0]["field"]), ("Invalid", "metadata.name"), "invalid name")

    # Pages of two, the continue token taken to another replica each time.
    for i in range(5):
        core1.create_namespaced_config_map(
            ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="page-%d" % i, labels={"page": "yes"}))
        )
    names, token, pages = [], None, 0
    while True:
        page = c.core(pages % 3).list_namespaced_config_map(ns, label_selector="page=yes", limit=2, _continue=token)
        pages += 1
        names += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            eq(page.metadata.remaining_item_count, None, "remainingItemCount of the last page")
            break
        assert len(page.items) == 2, page.items
    eq(names, ["page-%d" % i for i in range(5)], "names over the pages")
    eq(pages, 3, "pages")

    # 36.x makes the answer a V1Status, 37 a dict: the same JSON either way.
    deleted = raw(c.apis[0], core1.delete_namespaced_config_map("settings", ns))
    eq(
        (deleted["kind"], deleted["status"], deleted["details"]),
        ("Status", "Success", {"name": "settings", "kind": "configmaps", "uid": created.metadata.uid}),
        "what a delete answers",
    )
    status = api_error(404, core3.read_namespaced_config_map, "settings", ns)
    eq(
        (status["reason"], status["message"], status["details"]),
        ("NotFound", 'configmaps "settings" not found', {"name": "settings", "kind": "configmaps"}),
        "read after delete",
    )
    status = api_error(404, core2.delete_namespaced_config_map, "settings", ns)
    eq(status["reason"], "NotFound", "delete of a deleted object")


def web_deployment(ns, name="web", replicas=None, image="nginx:1.27"):
    """A Deployment as a user writes it: one container, ports: [{containerPort: 80}], no protocol."""
    d = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]},
            },
        },
    }
    if replicas is not None:
        d["spec"]["replicas"] = replicas
    return d


@check
def crud_deployments_and_subresources(c):
    ns = c.namespace("deploy")
    apps1, apps2, apps3 = c.apps(0), c.apps(1), c.apps(2)
    body = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(
                    containers=[
                        client.V1Container(name="web", image="nginx:1.27", ports=[client.V1ContainerPort(container_port=80)])
                    ]
                ),
            ),
        ),
    )
    created = apps1.create_namespaced_deployment(ns, body)
    eq(created.metadata.generation, 1, "generation")
    eq(created.spec.strategy.type, "RollingUpdate", "default strategy")
    eq(created.spec.revision_history_limit, 10, "default revisionHistoryLimit")
    container = created.spec.template.spec.containers[0]
    eq(container.ports[0].protocol, "TCP", "default port protocol")
    eq(container.image_pull_policy, "IfNotPresent", "default pull policy of a tagged image")
    eq(managers(raw(c.apis[0], created)), [("OpenAPI-Generator", "Update")], "the client's default field manager")

    scale = apps2.read_namespaced_deployment_scale("web", ns)
    eq((scale.kind, scale.spec.replicas, scale.status.selector), ("Scale", 2, "app=web"), "scale")
    scale = apps3.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 5}})
    eq(scale.spec.replicas, 5, "scale after the patch")
    scale.spec.replicas = 4
    scale = apps1.replace_namespaced_deployment_scale("web", ns, scale)
    eq(scale.spec.replicas, 4, "scale after the replace")
    d = apps2.read_namespaced_deployment("web", ns)
    eq((d.spec.replicas, d.metadata.generation), (4, 3), "replicas and generation after two scale writes")

    # The status subresource writes status only; the main resource ignores status.
    s = apps3.patch_namespaced_deployment_status("web", ns, {"status": {"replicas": 1, "observedGeneration": 3}})
    eq((s.status.replicas, s.status.observed_generation, s.metadata.generation), (1, 3, 3), "status patch")
    d = apps1.patch_namespaced_deployment("web", ns, {"status": {"replicas": 7}, "metadata": {"labels": {"tier": "front"}}})
    eq((d.status.replicas, d.metadata.labels, d.metadata.generation), (1, {"tier": "front"}, 3), "status through the main resource")

    # Update with the object read back: spec change bumps the generation.
    d.spec.template.spec.containers[0].image = "nginx:1.28"
    updated = apps2.replace_namespaced_deployment("web", ns, d)
    eq(updated.metadata.generation, 4, "generation after a template change")

    listed = apps3.list_deployment_for_all_namespaces(field_selector="metadata.namespace=%s" % ns)
    eq([(i.metadata.namespace, i.metadata.name) for i in listed.items], [(ns, "web")], "list across namespaces")

    apps1.delete_namespaced_deployment("web", ns, body=client.V1DeleteOptions(propagation_policy="Background"))
    until("the Deployment to be gone", lambda: not apps2.list_namespaced_deployment(ns).items)
    api_error(404, apps3.read_namespaced_deployment, "web", ns)


# -- Patches ---------------------------------------------------------------------------------


@check
def every_patch_type(c):
    ns = c.namespace("patch")
    core1, core2 = c.core(0), c.core(1)
    cm = core1.create_namespaced_config_map(
        ns,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="p", labels={"tmp": "x", "keep": "y"}),
            data={"color": "blue", "size": "M"},
        ),
    )

    # A list body is a JSON patch.
    patched = core2.patch_namespaced_config_map(
        "p",
        ns,
        [
            {"op": "test", "path": "/data/color", "value": "blue"},
            {"op": "replace", "path": "/data/color", "value": "red"},
            {"op": "add", "path": "/data/shape", "value": "round"},
            {"op": "remove", "path": "/metadata/labels/tmp"},
        ],
    )
    eq(patched.data, {"color": "red", "size": "M", "shape": "round"}, "data after the JSON patch")
    eq(patched.metadata.labels, {"keep": "y"}, "labels after the JSON patch")
    before = patched.metadata.resource_version
    status = api_error(422, core1.patch_namespaced_config_map, "p", ns, [{"op": "test", "path": "/data/color", "value": "blue"}])
    eq((status["reason"], status["code"]), ("Invalid", 422), "a failed JSON patch test")
    eq(core2.read_namespaced_config_map("p", ns).metadata.resource_version, before, "nothing written by the failed test")

    # Merge patch: null removes a key.
    patched = core1.patch_namespaced_config_map("p", ns, {"data": {"size": None, "weight": "1kg"}}, _content_type=MERGE)
    eq(patched.data, {"color": "red", "shape": "round", "weight": "1kg"}, "data after the merge patch")

    # A dict body is a strategic merge patch; patching a value to what it is stores nothing.
    patched = core2.patch_namespaced_config_map("p", ns, {"metadata": {"annotations": {"note": "hi"}}})
    eq(patched.metadata.annotations, {"note": "hi"}, "annotations after the strategic merge patch")
    again = core1.patch_namespaced_config_map("p", ns, {"metadata": {"annotations": {"note": "hi"}}})
    eq(again.metadata.resource_version, patched.metadata.resource_version, "resourceVersion after a no-op patch")

    # On a Deployment the strategic merge patch merges lists by key; the merge patch replaces them.
    apps1, apps2, apps3 = c.apps(0), c.apps(1), c.apps(2)
    d = web_deployment(ns)
    d["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    d["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "busybox:1.36"})
    apps1.create_namespaced_deployment(ns, d)

    def containers(dep):
        return [
            (k.name, k.image, [(e.name, e.value) for e in (k.env or [])], [p.container_port for p in (k.ports or [])])
            for k in dep.spec.template.spec.containers
        ]

    sp = {"spec": {"template": {"spec": {"containers": [{"name": "web", "env": [{"name": "B", "value": "2"}]}]}}}}
    dep = apps2.patch_namespaced_deployment("web", ns, sp, _content_type=STRATEGIC)
    eq(
        containers(dep),
        [("web", "nginx:1.27", [("B", "2"), ("A", "1")], [80]), ("sidecar", "busybox:1.36", [], [])],
        "containers after the strategic merge patch",
    )
    eq(dep.metadata.generation, 2, "generation after the strategic merge patch")
    sp = {"spec": {"template": {"spec": {"containers": [{"name": "web", "env": [{"name": "A", "$patch": "delete"}]}]}}}}
    dep = apps3.patch_namespaced_deployment("web", ns, sp)
    eq(containers(dep)[0][2], [("B", "2")], "env after a $patch: delete")
    mp = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}}
    dep = apps1.patch_namespaced_deployment("web", ns, mp, _content_type=MERGE)
    eq(containers(dep), [("web", "nginx:1.28", [], [])], "containers after the merge patch")
    eq(dep.metadata.generation, 4, "generation after the merge patch")
    jp = [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:1.29"}]
    dep = apps2.patch_namespaced_deployment("web", ns, jp)
    eq((containers(dep)[0][1], dep.metadata.generation), ("nginx:1.29", 5), "after the JSON patch")

    # Server-side apply through the same call: a ConfigMap key the manager stops applying goes.
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "namespace": ns}, "data": {"a": "1", "b": "2"}}
    _, code, _ = core1.patch_namespaced_config_map_with_http_info("applied", ns, cm, field_manager="py", _content_type=APPLY)
    eq(code, 201, "status code of an apply that creates")
    cm["data"] = {"a": "1"}
    applied, code, _ = core2.patch_namespaced_config_map_with_http_info("applied", ns, cm, field_manager="py", _content_type=APPLY)
    eq((code, applied.data), (200, {"a": "1"}), "an applied key dropped from the configuration")


# -- Server-side apply -----------------------------------------------------------------------


@check
def server_side_apply(c):
    ns = c.namespace("ssa")
    apis = c.apis

    def apply(i, body, manager, **kw):
        obj, code, _ = c.apps(i).patch_namespaced_deployment_with_http_info(
            "web", ns, body, field_manager=manager, _content_type=APPLY, **kw
        )
        return raw(apis[i], obj), code

    def ports(d):
        return d["spec"]["template"]["spec"]["containers"][0]["ports"]

    first, code = apply(0, web_deployment(ns, replicas=2), "py-apply", force=True)
    eq(code, 201, "status code of the first apply")
    eq((first["metadata"]["generation"], first["spec"]["replicas"]), (1, 2), "generation and replicas")
    eq(ports(first), [{"containerPort": 80, "protocol": "TCP"}], "ports")
    eq(managers(first), [("py-apply", "Apply")], "managers")
    entry = first["metadata"]["managedFields"][0]
    eq((entry["apiVersion"], entry["fieldsType"]), ("apps/v1", "FieldsV1"), "managedFields entry")
    assert "f:replicas" in entry["fieldsV1"]["f:spec"], entry

    # Re-applying the same configuration is a no-op, whichever replica takes it.
    for i in (1, 2, 0):
        again, code = apply(i, web_deployment(ns, replicas=2), "py-apply", force=True)
        eq(code, 200, "status code of a re-apply")
        eq(again["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"], "resourceVersion after a re-apply")
        eq(again["metadata"]["generation"], 1, "generation after a re-apply")
        eq(ports(again), [{"containerPort": 80, "protocol": "TCP"}], "ports after a re-apply")

    # Another manager changing an owned field conflicts, with kube's message and causes.
    scale_only = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}}
    status = api_error(409, apply, 1, scale_only, "py-scaler")
    eq(status["reason"], "Conflict", "conflict reason")
    eq(status["message"], 'Apply failed with 1 conflict: conflict with "py-apply": .spec.replicas', "conflict message")
    eq(
        status["details"]["causes"],
        [{"reason": "FieldManagerConflict", "message": 'conflict with "py-apply"', "field": ".spec.replicas"}],
        "conflict causes",
    )
    eq(c.apps(2).read_namespaced_deployment("web", ns).metadata.resource_version, first["metadata"]["resourceVersion"], "nothing written by the conflict")

    # force=True takes the field over.
    forced, _ = apply(2, scale_only, "py-scaler", force=True)
    eq((forced["spec"]["replicas"], forced["metadata"]["generation"]), (3, 2), "replicas and generation after the forced apply")
    assert "f:replicas" not in fields_of(forced, "py-apply")["f:spec"], "py-apply still owns replicas"
    eq(fields_of(forced, "py-scaler")["f:spec"], {"f:replicas": {}}, "py-scaler's fields")

    # A second manager applying identical values shares them: no conflict, no new generation.
    shared, code = apply(0, web_deployment(ns), "py-other")
    eq(code, 200, "status code of the sharing apply")
    eq(shared["metadata"]["generation"], 2, "generation after the sharing apply")
    eq(ports(shared), [{"containerPort": 80, "protocol": "TCP"}], "ports after the sharing apply")
    eq(sorted(m for m, _ in managers(shared)), ["py-apply", "py-other", "py-scaler"], "managers after the sharing apply")
    again, _ = apply(1, web_deployment(ns), "py-other")
    eq(again["metadata"]["resourceVersion"], shared["metadata"]["resourceVersion"], "resourceVersion after the shared re-apply")

    # Changing a shared field conflicts with the other owner, named by the item's key.
    status = api_error(409, apply, 2, web_deployment(ns, image="nginx:1.28"), "py-apply")
    eq(
        status["message"],
        'Apply failed with 1 conflict: conflict with "py-other": .spec.template.spec.containers[name="web"].image',
        "conflict on a shared list item",
    )
    dry, _ = apply(0, web_deployment(ns, image="nginx:1.28"), "py-apply", force=True, dry_run="All")
    eq(dry["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.28", "dry-run result")
    eq(
        c.apps(1).read_namespaced_deployment("web", ns).spec.template.spec.containers[0].image,
        "nginx:1.27",
        "image after the dry run",
    )
    forced, _ = apply(0, web_deployment(ns, image="nginx:1.28"), "py-apply", force=True)
    eq((forced["spec"]["template"]["spec"]["containers"][0]["image"], forced["metadata"]["generation"]), ("nginx:1.28", 3), "after the forced image change")

    # A manager of a different kind of operation (an update) shows with its API version.
    c.apps(1).patch_namespaced_deployment("web", ns, {"spec": {"minReadySeconds": 5}}, field_manager="py-editor")
    status = api_error(
        409,
        apply,
        2,
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"minReadySeconds": 9}},
        "py-apply",
    )
    eq(
        status["message"],
        'Apply failed with 1 conflict: conflict with "py-editor" using apps/v1: .spec.minReadySeconds',
        "conflict with an updater",
    )


# -- Watches ---------------------------------------------------------------------------------


def cm(name, labels=None, data=None):
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels or {"w": "yes"}), data=data)


@check
def watch_from_resource_version(c):
    ns = c.namespace("watch")
    core1, core2, core3 = c.core(0), c.core(1), c.core(2)
    a = core1.create_namespaced_config_map(ns, cm("a"))
    a2 = core1.patch_namespaced_config_map("a", ns, {"data": {"k": "v"}})
    b = core3.create_namespaced_config_map(ns, cm("b"))
    core2.delete_namespaced_config_map("a", ns)

    w = watch.Watch()
    events = []
    for e in w.stream(core2.list_namespaced_config_map, ns, label_selector="w=yes", resource_version=a.metadata.resource_version, timeout_seconds=10):
        events.append((e["type"], e["object"].metadata.name, e["object"].metadata.resource_version))
        if len(events) == 3:
            w.stop()
    eq(
        events[:2],
        [("MODIFIED", "a", a2.metadata.resource_version), ("ADDED", "b", b.metadata.resource_version)],
        "events after the resourceVersion",
    )
    eq([t for t, _, _ in events[2:]], ["DELETED"], "the last event")
    deleted_rv = events[2][2]
    assert deleted_rv not in (a.metadata.resource_version, a2.metadata.resource_version, b.metadata.resource_version), events
    eq(w.resource_version, deleted_rv, "the Watch's resourceVersion")

    # Resuming from the last event's resourceVersion sees only later writes.
    resumed = watch.Watch()
    seen = []
    writer = threading.Timer(0.5, lambda: core1.create_namespaced_config_map(ns, cm("c")))
    writer.start()
    for e in resumed.stream(core3.list_namespaced_config_map, ns, label_selector="w=yes", resource_version=deleted_rv, timeout_seconds=10):
        seen.append((e["type"], e["object"].metadata.name))
        resumed.stop()
    writer.join()
    eq(seen, [("ADDED", "c")], "events after resuming")

    # Without a resourceVersion the watch starts with the current objects.
    now = watch.Watch()
    initial = []
    for e in now.stream(core1.list_namespaced_config_map, ns, label_selector="w=yes", timeout_seconds=10):
        initial.append((e["type"], e["object"].metadata.name))
        if len(initial) == 2:
            now.stop()
    eq(sorted(initial), [("ADDED", "b"), ("ADDED", "c")], "the initial events")

    # timeoutSeconds ends the stream from the server's side; bookmarks may be asked for.
    start = time.monotonic()
    quiet = list(
        watch.Watch().stream(
            core2.list_namespaced_config_map,
            ns,
            label_selector="w=nothing",
            resource_version=deleted_rv,
            allow_watch_bookmarks=True,
            timeout_seconds=2,
        )
    )
    elapsed = time.monotonic() - start
    assert 1.5 <= elapsed < 10, "a 2 s watch lasted %.1f s" % elapsed
    assert all(e["type"] == "BOOKMARK" for e in quiet), quiet

    # A watch of one object by field selector, through a write that does not match afterwards.
    one = watch.Watch()
    got = []
    threading.Timer(0.5, lambda: core3.patch_namespaced_config_map("b", ns, {"data": {"x": "1"}})).start()
    for e in one.stream(core1.list_namespaced_config_map, ns, field_selector="metadata.name=b", resource_version=deleted_rv, timeout_seconds=10):
        got.append((e["type"], e["object"].metadata.name, (e["object"].data or {}).get("x")))
        one.stop()
    eq(got, [("MODIFIED", "b", "1")], "field-selected watch")


@check
def informer_list_then_watch(c):
    ns = c.namespace("informer")
    core1, core2, core3 = c.core(0), c.core(1), c.core(2)
    for name in ("x1", "x2"):
        core1.create_namespaced_config_map(ns, cm(name))

    # By hand, as controllers did before informers: list, then watch from the list's version.
    listed = core3.list_namespaced_config_map(ns, label_selector="w=yes")
    cache = {i.metadata.name: i.metadata.resource_version for i in listed.items}
    eq(sorted(cache), ["x1", "x2"], "listed names")
    # Writes between the list and the watch are not lost.
    core1.patch_namespaced_config_map("x1", ns, {"data": {"v": "2"}})
    core1.delete_namespaced_config_map("x2", ns)
    core1.create_namespaced_config_map(ns, cm("x3"))
    writer = threading.Timer(0.5, lambda: core3.create_namespaced_config_map(ns, cm("x4")))
    writer.start()
    w = watch.Watch()
    types = []
    for e in w.stream(core2.list_namespaced_config_map, ns, label_selector="w=yes", resource_version=listed.metadata.resource_version, timeout_seconds=15):
        name = e["object"].metadata.name
        types.append((e["type"], name))
        if e["type"] == "DELETED":
            cache.pop(name, None)
        else:
            cache[name] = e["object"].metadata.resource_version
        if "x4" in cache:
            w.stop()
    writer.join()
    eq(types, [("MODIFIED", "x1"), ("DELETED", "x2"), ("ADDED", "x3"), ("ADDED", "x4")], "events after the list")
    fresh = core1.list_namespaced_config_map(ns, label_selector="w=yes")
    eq(cache, {i.metadata.name: i.metadata.resource_version for i in fresh.items}, "the cache against a fresh list")

    # The client's SharedInformer: one list, then one long watch (no re-list loop).
    calls = []

    @functools.wraps(core2.list_namespaced_config_map)
    def list_configmaps(*args, **kwargs):
        calls.append("watch" if kwargs.get("watch") else "list")
        return core2.list_namespaced_config_map(*args, **kwargs)

    informer = SharedInformer(list_configmaps, namespace=ns, label_selector="w=yes")
    events, errors = [], []
    for kind in ("ADDED", "MODIFIED", "DELETED"):
        informer.add_event_handler(kind, functools.partial(lambda k, obj: events.append((k, obj.metadata.name)), kind))
    informer.add_event_handler("ERROR", errors.append)
    informer.start()
    try:
        until("the informer's initial list", lambda: len(events) >= 3)
        until("the informer's watch", lambda: "watch" in calls)
        core3.create_namespaced_config_map(ns, cm("x5"))
        core1.patch_namespaced_config_map("x3", ns, {"data": {"v": "3"}})
        core3.delete_namespaced_config_map("x1", ns)
        until("the informer to see three writes", lambda: len(events) >= 6)
        time.sleep(1)  # a re-listing informer would show more calls and events now
        eq(sorted(events[:3]), [("ADDED", "x1"), ("ADDED", "x3"), ("ADDED", "x4")], "the informer's initial events")
        eq(events[3:], [("ADDED", "x5"), ("MODIFIED", "x3"), ("DELETED", "x1")], "the informer's watch events")
        eq(sorted(informer.cache.list_keys()), ["%s/%s" % (ns, n) for n in ("x3", "x4", "x5")], "the informer's cache")
        eq(calls, ["list", "watch"], "the informer's requests")
        eq(errors, [], "the informer's errors")
    finally:
        informer.stop()


# -- create_from_yaml ------------------------------------------------------------------------


@check
def create_from_yaml(c):
    ns = c.namespace("yaml")
    manifest = os.path.join(HERE, "shop.yaml")
    created = utils.create_from_yaml(c.apis[0], yaml_file=manifest, namespace=ns)
    kinds = [[type(o).__name__ for o in objs] for objs in created]
    eq(
        kinds,
        [["V1ConfigMap"], ["V1Deployment"], ["V1Service"], ["V1Secret", "V1Role"], ["V1NetworkPolicy"], ["V1PodDisruptionBudget"]],
        "what create_from_yaml returned",
    )
    core2, core3 = c.core(1), c.core(2)
    eq(core2.read_namespaced_config_map("shop-config", ns).data, {"mode": "prod"}, "ConfigMap")
    secret = core3.read_namespaced_secret("shop-creds", ns)
    eq(secret.data, {"password": "aHVudGVyMg=="}, "the Secret's stringData, stored as data")
    svc = core2.read_namespaced_service("shop", ns)
    assert svc.spec.cluster_ip and svc.spec.cluster_ip != "None", svc.spec
    eq([(p.port, p.target_port, p.protocol) for p in svc.spec.ports], [(80, 8080, "TCP")], "Service ports")
    eq(c.apps(2).read_namespaced_deployment("shop", ns).metadata.generation, 1, "Deployment generation")
    eq(client.RbacAuthorizationV1Api(c.apis[1]).read_namespaced_role("shop-reader", ns).rules[0].verbs, ["get", "list"], "Role")
    eq(client.NetworkingV1Api(c.apis[2]).read_namespaced_network_policy("shop-deny", ns).spec.policy_types, ["Ingress"], "NetworkPolicy")
    eq(client.PolicyV1Api(c.apis[1]).read_namespaced_pod_disruption_budget("shop", ns).spec.min_available, 1, "PodDisruptionBudget")

    # Again: every object already exists.
    try:
        utils.create_from_yaml(c.apis[1], yaml_file=manifest, namespace=ns)
        raise AssertionError("creating the manifest twice succeeded")
    except utils.FailToCreateError as failure:
        eq([e.status for e in failure.api_exceptions], [409] * 7, "statuses of the second create")
        eq(json.loads(failure.api_exceptions[0].body)["reason"], "AlreadyExists", "reason of the second create")

    # apply=True: server-side apply of identical values takes co-ownership and changes nothing else.
    deployment = c.apps(0).read_namespaced_deployment("shop", ns)
    applied = utils.create_from_yaml(c.apis[2], yaml_file=manifest, namespace=ns, apply=True)
    eq(len(applied), 6, "documents applied")
    after = raw(c.apis[0], c.apps(0).read_namespaced_deployment("shop", ns))
    eq(after["metadata"]["generation"], deployment.metadata.generation, "generation after apply")
    eq(sorted(managers(after)), [("OpenAPI-Generator", "Update"), ("python-client", "Apply")], "managers after apply")
    rv = after["metadata"]["resourceVersion"]
    utils.create_from_yaml(c.apis[1], yaml_file=manifest, namespace=ns, apply=True)
    eq(c.apps(2).read_namespaced_deployment("shop", ns).metadata.resource_version, rv, "resourceVersion after applying again")


# -- The dynamic client ----------------------------------------------------------------------


@check
def dynamic_client(c):
    ns = c.namespace("dynamic")
    cache_dir = tempfile.mkdtemp()
    dyns = [dynamic.DynamicClient(api, cache_file=os.path.join(cache_dir, "discovery-%d.json" % i)) for i, api in enumerate(c.apis)]
    d1, d2, d3 = dyns
    cms = d1.resources.get(api_version="v1", kind="ConfigMap")
    eq((cms.name, cms.namespaced, cms.group_version), ("configmaps", True, "v1"), "discovered ConfigMap resource")
    assert {"create", "delete", "get", "list", "patch", "update", "watch"} <= set(cms.verbs), cms.verbs

    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dyn", "labels": {"d": "yes"}}, "data": {"a": "1"}}
    created = cms.create(body=body, namespace=ns)
    eq((created.metadata.name, created.data.a), ("dyn", "1"), "created")
    got = d2.resources.get(api_version="v1", kind="ConfigMap").get(name="dyn", namespace=ns)
    eq(got.metadata.resourceVersion, created.metadata.resourceVersion, "read back")
    listed = d3.resources.get(api_version="v1", kind="ConfigMap").get(namespace=ns, label_selector="d=yes")
    eq((listed.kind, [i.metadata.name for i in listed.items]), ("ConfigMapList", ["dyn"]), "list")

    patched = cms.patch(body={"data": {"b": "2"}}, name="dyn", namespace=ns)
    eq(patched.data.to_dict(), {"a": "1", "b": "2"}, "strategic merge patch")
    patched = cms.patch(body={"data": {"a": None}}, name="dyn", namespace=ns, content_type=MERGE)
    eq(patched.data.to_dict(), {"b": "2"}, "merge patch")
    patched = cms.patch(body=[{"op": "add", "path": "/data/c", "value": "3"}], name="dyn", namespace=ns, content_type=JSON_PATCH)
    eq(patched.data.to_dict(), {"b": "2", "c": "3"}, "JSON patch")
    applied = cms.server_side_apply(
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dyn"}, "data": {"b": "2", "d": "4"}},
        namespace=ns,
        field_manager="py-dynamic",
        force_conflicts=True,
    )
    eq(applied.data.to_dict(), {"b": "2", "c": "3", "d": "4"}, "server-side apply")
    eq(
        [(m.manager, m.operation) for m in applied.metadata.managedFields],
        [("OpenAPI-Generator", "Update"), ("py-dynamic", "Apply")],
        "managers after the apply",
    )
    replaced = cms.replace(body={**applied.to_dict(), "data": {"only": "this"}}, namespace=ns)
    eq(replaced.data.to_dict(), {"only": "this"}, "replace")
    stale = {**applied.to_dict(), "data": {"stale": "yes"}}
    status = api_error(409, cms.replace, body=stale, namespace=ns)
    eq(status["reason"], "Conflict", "replace with an old resourceVersion")

    # The dynamic watch, from a resourceVersion.
    threading.Timer(0.5, lambda: d2.resources.get(api_version="v1", kind="ConfigMap").delete(name="dyn", namespace=ns)).start()
    events = []
    watcher = watch.Watch()
    for e in d3.resources.get(api_version="v1", kind="ConfigMap").watch(
        namespace=ns, resource_version=replaced.metadata.resourceVersion, timeout=10, watcher=watcher
    ):
        events.append((e["type"], e["object"].metadata.name))
        watcher.stop()
    eq(events, [("DELETED", "dyn")], "dynamic watch events")
    status = api_error(404, cms.get, name="dyn", namespace=ns)
    eq(status["reason"], "NotFound", "get after delete")

    # Cluster-scoped resources and a subresource.
    namespaces = d2.resources.get(api_version="v1", kind="Namespace")
    eq(namespaces.namespaced, False, "Namespace is cluster-scoped")
    eq(namespaces.get(name=ns).status.phase, "Active", "namespace phase")
    deployments = d1.resources.get(api_version="apps/v1", kind="Deployment")
    deployments.create(body=web_deployment(ns, replicas=1), namespace=ns)
    scale = d2.resources.get(api_version="apps/v1", kind="Deployment").subresources["scale"]
    eq(scale.get(name="web", namespace=ns).spec.replicas, 1, "scale through the dynamic client")
    scale.patch(body={"spec": {"replicas": 3}}, name="web", namespace=ns, content_type=MERGE)
    eq(deployments.get(name="web", namespace=ns).spec.replicas, 3, "replicas after the scale patch")

    # A custom resource: its CRD made through the dynamic client, then found by discovery.
    group = "%s.example.com" % c.prefix
    crds = d1.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create(
        body={
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.%s" % group},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "subresources": {"status": {}},
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "properties": {
                                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}},
                                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                                },
                            }
                        },
                    }
                ],
            },
        }
    )

    def established():
        crd = crds.get(name="widgets.%s" % group)
        return any(k.type == "Established" and k.status == "True" for k in (crd.status.conditions or []))

    until("the CRD to be established", established)
    widgets = until("discovery of Widget", lambda: find_resource(d2, "%s/v1" % group, "Widget"))
    widget = widgets.create(body={"apiVersion": "%s/v1" % group, "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}}, namespace=ns)
    eq((widget.metadata.generation, widget.spec.size), (1, 3), "created Widget")
    widget = widgets.patch(body={"spec": {"color": "red"}}, name="w1", namespace=ns, content_type=MERGE)
    eq((widget.metadata.generation, widget.spec.to_dict()), (2, {"size": 3, "color": "red"}), "Widget after a merge patch")
    status = api_error(
        415, widgets.patch, body={"spec": {"color": "blue"}}, name="w1", namespace=ns, content_type=STRATEGIC
    )
    eq(status["reason"], "UnsupportedMediaType", "strategic merge patch of a custom resource")
    widget = widgets.server_side_apply(
        body={"apiVersion": "%s/v1" % group, "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 4}},
        namespace=ns,
        field_manager="py-dynamic",
        force_conflicts=True,
    )
    eq((widget.spec.size, widget.metadata.generation), (4, 3), "Widget after apply")
    status_res = widgets.subresources["status"]
    widget = status_res.patch(body={"status": {"ready": True}}, name="w1", namespace=ns, content_type=MERGE)
    eq((widget.status.ready, widget.metadata.generation), (True, 3), "Widget status")
    eq([i.metadata.name for i in d3.resources.get(api_version="%s/v1" % group, kind="Widget").get(namespace=ns).items], ["w1"], "Widget list")
    widgets.delete(name="w1", namespace=ns)
    api_error(404, widgets.get, name="w1", namespace=ns)


def find_resource(dyn, api_version, kind):
    """The dynamic client's resource for kind, or None while discovery does not list it yet."""
    try:
        return dyn.resources.get(api_version=api_version, kind=kind)
    except dynamic.exceptions.ResourceNotFoundError:
        dyn.resources.invalidate_cache()
        return None


# -- Discovery -------------------------------------------------------------------------------


@check
def version_and_discovery(c):
    c.namespace("discovery")
    info = client.VersionApi(c.apis[1]).get_code()
    assert info.major and info.git_version.startswith("v"), info
    groups = client.ApisApi(c.apis[2]).get_api_versions()
    names = [g.name for g in groups.groups]
    for g in ("apps", "batch", "rbac.authorization.k8s.io", "apiextensions.k8s.io", "coordination.k8s.io"):
        assert g in names, names
    core = client.CoreV1Api(c.apis[0]).get_api_resources()
    eq(core.group_version, "v1", "core group version")
    by_name = {r.name: r for r in core.resources}
    eq((by_name["configmaps"].kind, by_name["configmaps"].namespaced, by_name["configmaps"].short_names), ("ConfigMap", True, ["cm"]), "configmaps")
    assert "pods/status" in by_name, sorted(by_name)


def main():
    kubeconfig, prefix = sys.argv[1], sys.argv[2]
    print("kubernetes client %s, Python %s" % (kubernetes.__version__, sys.version.split()[0]), flush=True)
    cluster = Cluster(kubeconfig, prefix)
    failed = []
    for fn in CHECKS:
        print("--- %s" % fn.__name__, flush=True)
        start = time.monotonic()
        try:
            fn(cluster)
            print("ok %s (%.1f s)" % (fn.__name__, time.monotonic() - start), flush=True)
        except Exception:
            traceback.print_exc(file=sys.stdout)
            print("FAILED %s" % fn.__name__, flush=True)
            failed.append(fn.__name__)
    if failed:
        print("%d of %d checks failed: %s" % (len(failed), len(CHECKS), ", ".join(failed)), flush=True)
        sys.exit(1)
    print("all %d checks passed" % len(CHECKS), flush=True)


if __name__ == "__main__":
    main()
