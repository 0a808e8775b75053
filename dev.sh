#!/usr/bin/env bash
# The two commands of the README, for a fresh Debian machine with only the Rust toolchain:
#   ./dev.sh up [cluster up options]   install what the build needs, build, start a local cluster
#   ./dev.sh test                      install what the tests need, run the whole suite (what CI runs)
set -euo pipefail
cd "$(dirname "$0")"

# Installs the Debian packages named, if any is missing (RocksDB's bindings need libclang;
# `kubectl diff`, tested end to end, runs the system `diff`; the three-host test puts replicas
# in network namespaces with `ip`).
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
    ensure_packages clang libclang-dev diffutils iproute2
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
