"""A large list read by the official Python client: tests/list_streaming.rs fills a namespace
with thousands of ConfigMaps, whose list kuberaft streams in chunks, and runs this script with
the cluster's kubeconfig (client certificates, the CA verified). It reads the whole list at once
and then page by page (`limit` and `_continue`), and prints what it got for the test to check.

    python big_list.py KUBECONFIG NAMESPACE
"""

import sys

import kubernetes
from kubernetes import client, config


def main():
    kubeconfig, namespace = sys.argv[1], sys.argv[2]
    print(f"kubernetes client {kubernetes.__version__}, namespace {namespace}")
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()
    listed = v1.list_namespaced_config_map(namespace)
    names = {cm.metadata.name for cm in listed.items}
    payloads = [cm.data["payload"] for cm in listed.items if "payload" in (cm.data or {})]
    sizes = sorted({len(p) for p in payloads})
    print(
        f"listed {len(listed.items)} configmaps, {len(names)} names, "
        f"{len(payloads)} payloads of sizes {sizes}"
    )
    paged, pages, token = [], 0, None
    while True:
        page = v1.list_namespaced_config_map(namespace, limit=1000, _continue=token)
        pages += 1
        paged.extend(cm.metadata.name for cm in page.items)
        token = page.metadata._continue
        if not token:
            break
    same = sorted(paged) == sorted(names)
    print(f"paged {len(paged)} configmaps in {pages} pages, same names: {same}")


if __name__ == "__main__":
    main()
