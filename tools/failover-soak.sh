#!/usr/bin/env bash
# The failover test (tests/it/standby/failover.rs) as a longer run: a steady
# create load at RATE a second for DURATION seconds under `litestream replicate
# -exec`, SIGKILL, `litestream restore`, a promoted start; prints the run's
# figures (creates lost, how long before the kill the newest restored one
# was acknowledged, restore time, kill to serving, the hold).
#
#   RATE=150 DURATION=60 bash tools/failover-soak.sh
#
# Needs the virtualenv tools/test.sh creates (Litestream's binary); the
# create client is one closed-loop thread, so RATE is bounded by its
# round trip (a fresh TLS connection per create).
set -euo pipefail
cd "$(dirname "$0")/.."
RATE="${RATE:-150}"
DURATION="${DURATION:-60}"
export DIALPROOF_PYENV="${DIALPROOF_PYENV:-$(pwd)/target/pyenv}"
if [ ! -x "$DIALPROOF_PYENV/bin/litestream" ]; then
  echo "no $DIALPROOF_PYENV/bin/litestream: run tools/test.sh once" >&2
  exit 1
fi
FAILOVER_RATE="$RATE" FAILOVER_SECONDS="$DURATION" \
  cargo test -p dialproof --test it -- \
  standby::failover::a_promoted_standby_takes_over_without_double_leases --exact --nocapture 2>&1 |
  grep -E '^failover:|test result|panicked' 
