#!/usr/bin/env bash
# Resident memory of a serving process that has created many pending
# verifications, on two builds, A B A B: what a long-running service holds
# (the GET's held rows, SQLite's page caches, the lease and expiry tables),
# which dialproof-restart-bench does not see (it measures right after a
# restart, before any create or read).
#
# Each run starts a fresh server on an empty database (PENDING + 1000
# numbers), reads its VmRSS once READY ("idle"), has dialproof-load
# create PENDING verifications (20 keys, TTL 3600 s, so all stay pending)
# and reads VmRSS again ("created"). A second fresh server gets the same
# creates followed by DURATION seconds of GETs of random ids among all of
# them, and VmRSS is read at their end ("read": the workers' page caches
# have filled by then). It prints bytes per pending verification:
# (created - idle) / PENDING and (read - idle) / PENDING, with the first
# server's idle figure for both.
#
#   A_BIN=path/to/old/dialproof bash tools/serving-memory.sh
#   A_BIN=... B_BIN=... PENDING=300000 ROUNDS=2 bash tools/serving-memory.sh
#
# B_BIN defaults to this tree's release build. Everything stays on
# 127.0.0.1. Needs python3 (reads the JSON reports).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${A_BIN:?set A_BIN to the baseline binary}"
ROUNDS=${ROUNDS:-2}
PENDING=${PENDING:-300000}
DURATION=${DURATION:-10}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
OUT=$(mktemp -d /tmp/dialproof-serving-memory.XXXXXX)
if [ -z "${B_BIN:-}" ]; then
  cargo build --release -q --workspace --bins
  B_BIN=$TARGET/release/dialproof
fi
LOAD=$TARGET/release/dialproof-load
SERVER=""
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null || true' EXIT

# shellcheck source=tools/bench-server.sh
. tools/bench-server.sh

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$SERVER/status"; }

# load DIR BIN MIX...: the load tool against the server in DIR, creating
# PENDING verifications first (TTL 3600 s, so all stay pending).
load() {
  local dir=$1 bin=$2
  shift 2
  "$LOAD" --target "https://$HTTPS" --cacert "$dir/data/tls/cert.pem" \
    --concurrency 50 --threads 2 --quiet --setup-local 20 \
    --config "$dir/dialproof.toml" --dialproof-bin "$bin" --prefill "$PENDING" \
    --ttl 3600 "$@" > /dev/null
}

# per_pending KIB IDLE_KIB: bytes per pending verification.
per_pending() { echo $(( ($1 - $2) * 1024 / PENDING )); }

run() {
  local name=$1 bin=$2 round=$3 dir="$OUT/$1-$3"
  local idle created read
  # Created only: then a second of GETs of one of them.
  start_bench_server "$dir/created" "$bin" $((PENDING + 1000))
  sleep 2
  idle=$(rss_kib)
  load "$dir/created" "$bin" --mix read=1 --working-set 1 --duration 1
  created=$(rss_kib)
  stop_bench_server
  # Created, then read: GETs of random ids among all of them.
  start_bench_server "$dir/read" "$bin" $((PENDING + 1000))
  load "$dir/read" "$bin" --mix read=1 --working-set "$PENDING" --duration "$DURATION"
  read=$(rss_kib)
  stop_bench_server
  echo "$name round $round: idle $idle KiB; after $PENDING creates $created KiB" \
    "($(per_pending "$created" "$idle") B per pending); after the creates and ${DURATION} s" \
    "of reads $read KiB ($(per_pending "$read" "$idle") B per pending)" | tee -a "$OUT/summary"
  echo "$name $(per_pending "$created" "$idle") $(per_pending "$read" "$idle")" >> "$OUT/figures"
}

for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then
    run A "$A_BIN" "$round"; run B "$B_BIN" "$round"
  else
    run B "$B_BIN" "$round"; run A "$A_BIN" "$round"
  fi
done

echo "== $(date -u +%Y-%m-%d) on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "A = $A_BIN, B = $B_BIN; PENDING=$PENDING DURATION=$DURATION"
python3 - "$OUT/figures" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for i, what in ((1, "after the creates"), (2, "after the reads")):
    a = statistics.median(float(r[i]) for r in rows if r[0] == "A")
    b = statistics.median(float(r[i]) for r in rows if r[0] == "B")
    print(f"median bytes per pending verification {what}: A {a:.0f}, B {b:.0f}")
EOF
echo "files: $OUT"
