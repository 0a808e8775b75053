"""kuberaft's CBOR encoding against an independent CBOR implementation (Python's cbor2).

tests/cbor.rs starts a three-replica cluster and runs this script with the cluster's kubeconfig
(one context per replica, `node-1`..`node-3`; client certificates, the CA verified). The bodies
sent are encoded by cbor2, and the bodies received are decoded by it and checked byte for byte
against Kubernetes' CBOR profile: the self-described tag d9 d9 f7 first, definite lengths,
strings and map keys as byte strings, map keys sorted (cbor2's canonical encoding of the decoded
value must give back exactly the bytes served). It goes through create, get, list, update,
server-side apply and watch of a built-in type and a custom resource, writing through one replica
and reading through the others, then the refusals: 415 for patches other than apply sent as
CBOR, 400 for duplicate keys, invalid UTF-8, NaN and deep nesting, with kube-apiserver's words.
Every check runs (a failure does not hide the ones after it); the script exits 1 if any failed.

    python cbor_e2e.py KUBECONFIG PREFIX
"""

import base64
import json
import sys
from collections.abc import Mapping
import threading
import traceback

import cbor2
from kubernetes import config

CBOR = "application/cbor"
CBOR_SEQ = "application/cbor-seq"
APPLY_CBOR = "application/apply-patch+cbor"
SELF_DESCRIBED = b"\xd9\xd9\xf7"
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def strings(v):
    """A decoded CBOR value as JSON would hold it: byte strings as text (kube encodes strings
    as bytes), maps as dicts and arrays as lists (cbor2 may give frozen forms)."""
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, cbor2.CBORTag) and v.tag == 22:
        # Go byte slices: raw bytes, "expected base64" (JSON's form).
        return base64.b64encode(v.value).decode()
    if isinstance(v, Mapping):
        return {strings(k): strings(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [strings(x) for x in v]
    return v


def all_strings_are_bytes(v):
    """Whether every string and map key of a decoded value was a byte string."""
    if isinstance(v, str):
        return False
    if isinstance(v, Mapping):
        return all(all_strings_are_bytes(k) and all_strings_are_bytes(x) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return all(all_strings_are_bytes(x) for x in v)
    return True


def profile(body):
    """Checks a served CBOR object against kube's profile and returns it decoded (as text)."""
    expect(body[:3] == SELF_DESCRIBED, "no self-described tag: %r" % body[:8])
    decoded = cbor2.loads(body)
    expect(all_strings_are_bytes(decoded), "a text string where kube writes a byte string")
    again = SELF_DESCRIBED + cbor2.dumps(decoded, canonical=True)
    expect(again == body, "not the deterministic encoding:\n%s\n%s" % (body.hex(), again.hex()))
    return strings(decoded)


def raw_map(pairs):
    """A definite-length CBOR map of already encoded (key, value) pairs, duplicates allowed."""
    expect(len(pairs) < 24, "raw_map takes fewer than 24 pairs")
    return bytes([0xA0 + len(pairs)]) + b"".join(k + v for k, v in pairs)


class Cluster:
    def __init__(self, kubeconfig, prefix):
        self.prefix = prefix
        self.apis = [
            config.new_client_from_config(config_file=kubeconfig, context="node-%d" % i)
            for i in (1, 2, 3)
        ]

    def request(self, node, method, path, body=None, content_type=None, accept=CBOR, stream=False):
        api = self.apis[node]
        headers = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        return api.rest_client.pool_manager.request(
            method,
            api.configuration.host + path,
            body=body,
            headers=headers,
            preload_content=not stream,
            timeout=30,
        )

    def json(self, node, method, path, obj=None):
        r = self.request(
            node,
            method,
            path,
            json.dumps(obj).encode() if obj is not None else None,
            "application/json",
            "application/json",
        )
        return r.status, json.loads(r.data or b"null")


def expect_codes(*responses):
    """Checks that the writes of a watch check succeeded (201, 200, 200)."""
    got = [r.status for r in responses]
    expect(got == [201, 200, 200], "writes answered %s: %r" % (got, [r.data[:200] for r in responses]))


def status_of(r):
    expect(r.headers.get("Content-Type") == CBOR, "the Status is not CBOR: %s" % r.headers.get("Content-Type"))
    return profile(r.data)


def configmap(name, ns, data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def item_end(b, i=0):
    """Where the CBOR data item at b[i] ends, None if b holds only part of it. Items must have
    definite lengths (kube's encoder writes no others): an indefinite one raises ValueError."""
    if i >= len(b):
        return None
    major, info = b[i] >> 5, b[i] & 0x1F
    i += 1
    if info < 24:
        arg = info
    elif info <= 27:
        width = 1 << (info - 24)
        if i + width > len(b):
            return None
        arg = int.from_bytes(b[i : i + width], "big")
        i += width
    else:
        raise ValueError("an indefinite length at byte %d" % (i - 1))
    if major in (2, 3):
        return i + arg if i + arg <= len(b) else None
    if major in (4, 5):
        for _ in range(arg * (2 if major == 5 else 1)):
            i = item_end(b, i)
            if i is None:
                return None
        return i
    if major == 6:
        return item_end(b, i)
    return i


def watch_events(c, node, path, count, out):
    """Reads `count` watch events of `path` from replica `node` into `out` as
    (content type, event bytes, decoded event): the CBOR sequence is cut into items as the
    chunks arrive."""
    r = c.request(node, "GET", path, stream=True)
    try:
        out.append(("content-type", r.headers.get("Content-Type"), None))
        buf = b""
        chunks = r.read_chunked() if r.chunked else r.stream(1)
        for chunk in chunks:
            buf += chunk
            end = item_end(buf)
            while end is not None and len(out) <= count:
                out.append(("event", buf[:end], cbor2.loads(buf[:end])))
                buf = buf[end:]
                end = item_end(buf)
            if len(out) > count:
                break
    except Exception as e:  # reported by the check that reads `out`
        out.append(("error", repr(e), None))
    finally:
        r.release_conn()


def exercise_watch(c, path, write):
    """Watches `path` on replica 3 while `write` changes objects through replica 1; returns
    the decoded events after checking each is a self-described CBOR watch event."""
    status = c.request(0, "GET", path.split("?")[0])
    rv = profile(status.data)["metadata"]["resourceVersion"]
    out = []
    t = threading.Thread(
        target=watch_events,
        args=(c, 2, path + "&watch=1&resourceVersion=" + rv, 3, out),
    )
    t.start()
    try:
        write()
    finally:
        t.join(60)
    expect(not t.is_alive(), "the watch did not deliver three events")
    errors = [o for o in out if o[0] == "error"]
    expect(not errors, "the watch failed: %s" % errors)
    expect(out[0][1] == CBOR_SEQ, "watch content type %r" % out[0][1])
    events = []
    for _, raw, event in out[1:]:
        expect(raw[:3] == SELF_DESCRIBED, "a watch event without the tag: %s" % raw[:16].hex())
        obj = event[b"object"]
        # The object inside is itself a tagged CBOR object, as kube embeds it.
        inner = raw.index(b"object") + len(b"object")
        expect(raw[inner : inner + 3] == SELF_DESCRIBED, "the event's object without the tag")
        expect(list(event.keys()) == [b"type", b"object"], "event keys %r" % list(event.keys()))
        events.append((event[b"type"].decode(), strings(obj)))
    return events


@check
def builtin_crud_apply_and_watch(c):
    ns = c.prefix + "-builtin"
    code, _ = c.json(0, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    expect(code == 201, "namespace %d" % code)
    base = "/api/v1/namespaces/%s/configmaps" % ns

    # Create through replica 1 with a body cbor2 encoded (text strings, as most encoders write).
    body = cbor2.dumps(cbor2.CBORTag(55799, configmap("one", ns, {"k": "v", "n": "1"})))
    r = c.request(0, "POST", base, body, CBOR)
    expect(r.status == 201, "create: %d %r" % (r.status, r.data[:200]))
    expect(r.headers.get("Content-Type") == CBOR, "create content type %s" % r.headers.get("Content-Type"))
    created = profile(r.data)
    expect(created["kind"] == "ConfigMap" and created["data"] == {"k": "v", "n": "1"}, created)

    # Get through replica 2: the same bytes (deterministic), and what JSON says.
    r2 = c.request(1, "GET", base + "/one")
    expect(r2.status == 200, "get %d" % r2.status)
    expect(r2.data == r.data, "get differs from the create's answer")
    _, as_json = c.json(1, "GET", base + "/one")
    expect(profile(r2.data) == as_json, "CBOR and JSON disagree:\n%s\n%s" % (profile(r2.data), as_json))

    # Update through replica 3.
    created["data"]["k"] = "w"
    r = c.request(2, "PUT", base + "/one", cbor2.dumps(created), CBOR)
    expect(r.status == 200, "update %d %r" % (r.status, r.data[:300]))
    updated = profile(r.data)
    expect(updated["data"]["k"] == "w", updated)

    # Server-side apply with a CBOR configuration.
    applied = configmap("two", ns, {"a": "b"})
    r = c.request(0, "PATCH", base + "/two?fieldManager=cbor-e2e", cbor2.dumps(applied), APPLY_CBOR)
    expect(r.status == 201, "apply %d %r" % (r.status, r.data[:300]))
    obj = profile(r.data)
    managers = [(m["manager"], m["operation"]) for m in obj["metadata"]["managedFields"]]
    expect(managers == [("cbor-e2e", "Apply")], managers)

    # List through replica 2: items without their type, as kube lists built-in types.
    r = c.request(1, "GET", base)
    expect(r.status == 200, "list %d" % r.status)
    lst = profile(r.data)
    expect(lst["kind"] == "ConfigMapList", lst["kind"])
    names = sorted(i["metadata"]["name"] for i in lst["items"])
    expect(names == ["kube-root-ca.crt", "one", "two"] or names == ["one", "two"], names)
    expect(all("kind" not in i for i in lst["items"]), "list items carry kind")
    _, as_json = c.json(1, "GET", base)
    expect(lst == as_json, "CBOR and JSON lists disagree")

    def write():
        expect_codes(
            c.request(0, "POST", base, cbor2.dumps(configmap("three", ns, {"x": "y"})), CBOR),
            c.request(0, "PATCH", base + "/three?fieldManager=cbor-e2e&force=true", cbor2.dumps(configmap("three", ns, {"x": "z"})), APPLY_CBOR),
            c.request(0, "DELETE", base + "/three"),
        )

    events = exercise_watch(c, base + "?fieldSelector=metadata.name%3Dthree", write)
    expect([t for t, _ in events] == ["ADDED", "MODIFIED", "DELETED"], [t for t, _ in events])
    expect(events[1][1]["data"] == {"x": "z"}, events[1][1])
    expect(events[0][1]["kind"] == "ConfigMap", events[0][1].get("kind"))


@check
def byte_fields_are_raw_bytes(c):
    ns = c.prefix + "-bytes"
    c.json(0, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    raw = b"\x00\xffhi"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": raw}}
    # cbor2 writes Python bytes as a plain byte string: the Secret's raw data.
    r = c.request(0, "POST", "/api/v1/namespaces/%s/secrets" % ns, cbor2.dumps(secret), CBOR)
    expect(r.status == 201, "create %d %r" % (r.status, r.data[:300]))
    value = cbor2.loads(r.data)[b"data"][b"k"]
    # kube writes []byte as a byte string under tag 22 (expected base64): d6 44 00 ff 68 69.
    expect(isinstance(value, cbor2.CBORTag) and value.tag == 22 and value.value == raw, repr(value))
    expect(b"\xd6\x44" + raw in r.data, "no tag 22 around the data")
    _, as_json = c.json(1, "GET", "/api/v1/namespaces/%s/secrets/s" % ns)
    expect(as_json["data"] == {"k": base64.b64encode(raw).decode()}, as_json["data"])
    expect(profile(r.data) == as_json, "CBOR and JSON disagree")


@check
def a_pod_reads_the_same_in_cbor_and_json(c):
    ns = c.prefix + "-pod"
    c.json(0, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]},
    }
    code, _ = c.json(0, "POST", "/api/v1/namespaces/%s/pods" % ns, pod)
    expect(code == 201, "pod %d" % code)
    r = c.request(2, "GET", "/api/v1/namespaces/%s/pods/p" % ns)
    got = profile(r.data)
    _, as_json = c.json(2, "GET", "/api/v1/namespaces/%s/pods/p" % ns)
    expect(got == as_json, "pod differs:\n%s\n%s" % (got, as_json))
    # Integers stay integers.
    expect(cbor2.loads(r.data)[b"spec"][b"terminationGracePeriodSeconds"] == 30, "grace period")


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.cbor.example.com"},
    "spec": {
        "group": "cbor.example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "ratio": {"type": "number"},
                                    "color": {"type": "string"},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


@check
def custom_resources_in_cbor(c):
    ns = c.prefix + "-custom"
    c.json(0, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    code, body = c.json(0, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    expect(code in (201, 409), "crd %d %s" % (code, body))
    base = "/apis/cbor.example.com/v1/namespaces/%s/gadgets" % ns
    for _ in range(100):
        if all(c.request(i, "GET", base).status == 200 for i in range(3)):
            break
        threading.Event().wait(0.2)
    gadget = {
        "apiVersion": "cbor.example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g1"},
        "spec": {"size": 3, "ratio": 0.5, "color": "red"},
    }
    r = c.request(0, "POST", base, cbor2.dumps(gadget), CBOR)
    expect(r.status == 201, "create %d %r" % (r.status, r.data[:300]))
    created = profile(r.data)
    expect(created["spec"] == {"size": 3, "ratio": 0.5, "color": "red"}, created["spec"])
    # 0.5 goes out in half precision (f9 3800), the shortest form that holds it.
    expect(b"\xf9\x38\x00" in r.data, "0.5 is not a half-precision float")

    r = c.request(1, "GET", base + "/g1")
    expect(r.status == 200 and profile(r.data) == created, "get %d" % r.status)

    created["spec"]["size"] = 4
    r = c.request(2, "PUT", base + "/g1", cbor2.dumps(created), CBOR)
    expect(r.status == 200 and profile(r.data)["spec"]["size"] == 4, "update %d %r" % (r.status, r.data[:300]))

    applied = {"apiVersion": "cbor.example.com/v1", "kind": "Gadget", "metadata": {"name": "g2"}, "spec": {"color": "blue"}}
    r = c.request(0, "PATCH", base + "/g2?fieldManager=cbor-e2e", cbor2.dumps(applied), APPLY_CBOR)
    expect(r.status == 201, "apply %d %r" % (r.status, r.data[:300]))

    r = c.request(1, "GET", base)
    lst = profile(r.data)
    expect(lst["kind"] == "GadgetList", lst["kind"])
    # Custom resources' list items keep their type, as kube lists them.
    expect([(i["kind"], i["metadata"]["name"]) for i in lst["items"]] == [("Gadget", "g1"), ("Gadget", "g2")], lst["items"])
    _, as_json = c.json(1, "GET", base)
    expect(lst == as_json, "CBOR and JSON lists disagree")

    def write():
        gadget3 = dict(gadget, metadata={"name": "g3"})
        expect_codes(
            c.request(0, "POST", base, cbor2.dumps(gadget3), CBOR),
            c.request(0, "PATCH", base + "/g3?fieldManager=cbor-e2e&force=true", cbor2.dumps(dict(applied, metadata={"name": "g3"})), APPLY_CBOR),
            c.request(0, "DELETE", base + "/g3"),
        )

    events = exercise_watch(c, base + "?fieldSelector=metadata.name%3Dg3", write)
    expect([t for t, _ in events] == ["ADDED", "MODIFIED", "DELETED"], [t for t, _ in events])
    expect(events[0][1]["kind"] == "Gadget", events[0][1])


@check
def negotiation_by_quality(c):
    path = "/api/v1/namespaces/default"
    r = c.request(1, "GET", path, accept="application/json;q=0.5, application/cbor")
    expect(r.headers.get("Content-Type") == CBOR, "preferred CBOR: %s" % r.headers.get("Content-Type"))
    profile(r.data)
    r = c.request(1, "GET", path, accept="application/cbor;q=0.2, application/json")
    expect(r.headers.get("Content-Type") == "application/json", "preferred JSON: %s" % r.headers.get("Content-Type"))
    # A missing object's Status in CBOR, as the JSON one.
    r = c.request(1, "GET", "/api/v1/namespaces/default/configmaps/absent")
    expect(r.status == 404, "404: %d" % r.status)
    _, as_json = c.json(1, "GET", "/api/v1/namespaces/default/configmaps/absent")
    expect(status_of(r) == as_json, "Status differs: %s / %s" % (status_of(r), as_json))


@check
def patches_other_than_apply_have_no_cbor_form(c):
    ns = c.prefix + "-patch"
    c.json(0, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    c.json(0, "POST", "/api/v1/namespaces/%s/configmaps" % ns, configmap("m", ns, {"a": "b"}))
    for media in (CBOR, "application/merge-patch+cbor"):
        r = c.request(1, "PATCH", "/api/v1/namespaces/%s/configmaps/m" % ns, cbor2.dumps({"data": {"a": "c"}}), media)
        expect(r.status == 415, "%s: %d" % (media, r.status))
        st = status_of(r)
        want = (
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, "
            "application/apply-patch+yaml, application/apply-patch+cbor"
        )
        expect((st["code"], st["reason"], st["message"]) == (415, "UnsupportedMediaType", want), st)
    _, cm = c.json(1, "GET", "/api/v1/namespaces/%s/configmaps/m" % ns)
    expect(cm["data"] == {"a": "b"}, "the refused patch changed the object")


@check
def the_decoder_refuses_invalid_input(c):
    ns = c.prefix + "-refuse"
    c.json(0, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    path = "/api/v1/namespaces/%s/configmaps" % ns
    d = cbor2.dumps
    head = [(d("apiVersion"), d("v1")), (d("kind"), d("ConfigMap")), (d("metadata"), d({"name": "bad"}))]
    handled = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
    cases = [
        ("duplicate key", raw_map(head + [(d("data"), raw_map([(d("a"), d("1")), (d("a"), d("2"))]))]),
         handled + 'cbor: found duplicate map key "a" at map element index 1'),
        ("invalid UTF-8", raw_map(head + [(d("data"), raw_map([(d("a"), b"\x62\xc3\x28")]))]),
         handled + "cbor: invalid UTF-8 string"),
        ("NaN", raw_map(head + [(d("data"), raw_map([(d("a"), d(float("nan")))]))]),
         handled + "cbor: data item of cbor type primitives is not accepted by protocol: floating-point NaN"),
        ("deep nesting", raw_map(head + [(d("data"), b"\x81" * 70 + d(1))]),
         "the object provided is unrecognized (must be of type ConfigMap): unable to determine "
         "group/version/kind: cbor: exceeded max nested level 64 ("),
        ("a length past the body", raw_map(head + [(d("data"), b"\x5a\xff\xff\xff\xff")]),
         "the object provided is unrecognized (must be of type ConfigMap): unable to determine "
         "group/version/kind: unexpected EOF ("),
        ("a duplicate top-level key", raw_map(head + [(d("kind"), d("ConfigMap"))]),
         "the object provided is unrecognized (must be of type ConfigMap): unable to determine "
         'group/version/kind: cbor: found duplicate map key "kind" at map element index 3 ('),
    ]
    failures = []
    for name, body, message in cases:
        r = c.request(1, "POST", path, body, CBOR)
        st = status_of(r) if r.status == 400 else {"code": r.status, "body": r.data[:200]}
        ok = (
            st.get("code") == 400
            and st.get("reason") == "BadRequest"
            and st.get("status") == "Failure"
            and st.get("message", "").startswith(message)
        )
        if not ok:
            failures.append("%s: %s" % (name, st))
    expect(not failures, "\n".join(failures))
    code, _ = c.json(1, "GET", path + "/bad")
    expect(code == 404, "a refused body was stored")


def main():
    kubeconfig, prefix = sys.argv[1], sys.argv[2]
    print("cbor2 %s" % getattr(cbor2, "__version__", "?"))
    c = Cluster(kubeconfig, prefix)
    failed = 0
    for fn in CHECKS:
        try:
            fn(c)
            print("PASS %s" % fn.__name__)
        except Exception:
            failed += 1
            print("FAIL %s\n%s" % (fn.__name__, traceback.format_exc()))
    print("%d passed, %d failed" % (len(CHECKS) - failed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
