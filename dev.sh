#!/usr/bin/env bash
# The two commands of the README, for a fresh Debian machine with only the Rust toolchain:
#   ./dev.sh up [cluster up options]   install what the build needs, build, start a local cluster
#   ./dev.sh test                      install what the tests need, run the whole suite (what CI runs)
set -euo pipefail
cd "$(dirname "$0")"

# Installs the Debian packages named, if any is missing (RocksDB's bindings need libclang;
# `kubectl diff`, tested end to end, runs the system `diff`; the three-host test puts replicas
# in network namespaces with `ip`; the official Python client runs in virtualenvs).
ensure_packages() {
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "installing: ${missing[*]}"
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
}

# Makes one virtualenv per official Python client version in tests/python/clients, under
# python-clients/ in the cargo target dir (where tests/python_client.rs looks), and installs
# that version into it. A virtualenv that already has its version is left as it is.
ensure_python_clients() {
  local target dir spec
  target=$(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  dir="$target/python-clients"
  mkdir -p "$dir"
  while read -r spec; do
    [[ -z $spec || $spec == \#* ]] && continue
    local venv="$dir/${spec/==/-}" version="${spec#*==}"
    if ! "$venv/bin/python" -c "import sys, kubernetes; sys.exit(kubernetes.__version__ != '$version')" 2>/dev/null; then
      echo "installing the Python client $spec into $venv"
      rm -rf "$venv"
      python3 -m venv "$venv"
      "$venv/bin/pip" install --quiet --disable-pip-version-check "$spec"
    fi
    # What the scripts import besides the client (already-satisfied pins cost no download).
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/python/requirements
  done <tests/python/clients
  export KUBERAFT_PYTHON_CLIENTS="$dir"
}

case "${1:-}" in
  up)
    shift
    ensure_packages clang libclang-dev
    cargo build --release --locked -p kuberaft
    target="${CARGO_TARGET_DIR:-target}"
    exec "$target/release/kuberaft" cluster up "$@"
    ;;
  test)
    shift
    ensure_packages clang libclang-dev diffutils iproute2 python3 python3-venv
    ensure_python_clients
    if ! command -v kubectl >/dev/null 2>&1; then
      echo "FATAL: kubectl is not installed; the end-to-end tests drive the cluster with the real kubectl." >&2
      exit 1
    fi
    cargo test --workspace --locked "$@" -- --test-threads=1
    ;;
  *)
    echo "usage: ./dev.sh up [--nodes N] [--dir DIR] ...   build and start a local cluster" >&2
    echo "       ./dev.sh test                              run the whole test suite" >&2
    exit 2
    ;;
esac
