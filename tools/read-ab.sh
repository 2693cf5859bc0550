#!/usr/bin/env bash
# GETs over a realistic working set, on two builds of the service,
# alternating A B A B (the machine's other load varies): A is an older
# commit (BASE, by default the last commit before GETs of rows outside the
# held newest ones were read on the worker's own connection), B this tree.
#
# Each round starts each build's server afresh on an empty database with
# a pool of PREFILL + POOL_EXTRA numbers, then:
#   1. its cheapest route: dialproof-load --mix get=1 (GET /, a 404) for
#      DURATION seconds, CONNECTIONS in flight;
#   2. reads over a working set: dialproof-load --prefill PREFILL (that many
#      verifications created first, over KEYS keys, not timed) then
#      --mix read=1 --working-set (all of them) --zipf ZIPF for DURATION
#      seconds: GETs of random ids among everything created, as clients
#      poll the many verifications they created, not one. MIX replaces
#      `read=1`, e.g. MIX=read=9,create=1: clients poll while others
#      create, so the database changes under the reads (POOL_EXTRA numbers
#      beyond the prefill must cover the run's creates).
# It prints, per run, the read rate, its ratio to the same server's GET /,
# the server's CPU time per answer (--server-pid: less disturbed by other
# load on the machine than a rate), and at the end the medians and B/A.
#
#   bash tools/read-ab.sh
#   BASE=<commit> ROUNDS=3 PREFILL=150000 DURATION=10 ZIPF=0 bash tools/read-ab.sh
#   BASE_BIN=path/to/old/dialproof bash tools/read-ab.sh   # skip building BASE
#   MIX=read=9,create=1 POOL_EXTRA=200000 bash tools/read-ab.sh
#
# BASE is built from a git worktree under target/ab-base into the same
# target directory as this tree (only the workspace's crates are built
# twice); its binary is copied aside first. Everything stays on 127.0.0.1.
# Needs python3 (reads the JSON reports).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${BASE:-7270bb1}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10}
PREFILL=${PREFILL:-150000}
CONNECTIONS=${CONNECTIONS:-50}
KEYS=${KEYS:-20}
ZIPF=${ZIPF:-0}
MIX=${MIX:-read=1}
POOL_EXTRA=${POOL_EXTRA:-10000}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
OUT=$(mktemp -d /tmp/dialproof-read-ab.XXXXXX)

A_NAME=${BASE_BIN:-$BASE}
if [ -z "${BASE_BIN:-}" ]; then
  WT=$PWD/target/ab-base/src
  if [ ! -d "$WT" ]; then git worktree add -f --detach "$WT" "$BASE" >/dev/null; fi
  git -C "$WT" checkout -q --detach "$BASE"
  CARGO_TARGET_DIR=$TARGET cargo build --release -q -p dialproof --manifest-path "$WT/Cargo.toml"
  cp "$TARGET/release/dialproof" "$OUT/dialproof-base"
  BASE_BIN=$OUT/dialproof-base
fi
cargo build --release -q --workspace --bins
HEAD_BIN=$TARGET/release/dialproof
LOAD=$TARGET/release/dialproof-load
SERVER=""
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null || true' EXIT

# shellcheck source=tools/bench-server.sh
. tools/bench-server.sh

# run NAME BINARY ROUND: one fresh server, its GET / and its reads.
run() {
  local name=$1 bin=$2 round=$3 dir="$OUT/$1-$3"
  start_bench_server "$dir" "$bin" $((PREFILL + POOL_EXTRA))
  local common=(--target "https://$HTTPS" --cacert "$dir/data/tls/cert.pem"
    --concurrency "$CONNECTIONS" --threads 2 --duration "$DURATION" --quiet
    --server-pid "$SERVER")
  "$LOAD" "${common[@]}" --mix get=1 --path / --json "$dir/get.json"
  "$LOAD" "${common[@]}" --mix "$MIX" --setup-local "$KEYS" --config "$dir/dialproof.toml" \
    --dialproof-bin "$bin" --prefill "$PREFILL" --working-set "$PREFILL" --zipf "$ZIPF" \
    --ttl 3600 --json "$dir/read.json"
  stop_bench_server
  local get read
  get=$(field "$dir/get.json" "round(r['throughput_per_second'])")
  read=$(field "$dir/read.json" "round(r['operations']['read']['ok_per_second'])")
  echo "$name round $round: GET / $get/s; reads over $(field "$dir/read.json" "r['prefill']['created']") verifications" \
    "$read ok/s ($(field "$dir/read.json" "r['errors']") errors, p50/p99" \
    "$(field "$dir/read.json" "r['operations']['read']['latency_ms']['p50']")/$(field "$dir/read.json" "r['operations']['read']['latency_ms']['p99']") ms)," \
    "$(python3 -c "print(round($read / $get, 2))") of GET /;" \
    "server CPU per read $(field "$dir/read.json" "round(r['server_cpu']['per_answer_us'], 1)") us," \
    "per GET / $(field "$dir/get.json" "round(r['server_cpu']['per_answer_us'], 1)") us" | tee -a "$OUT/summary"
  echo "$name $read $get $(field "$dir/read.json" "r['server_cpu']['per_answer_us']")" \
    "$(field "$dir/get.json" "r['server_cpu']['per_answer_us']")" >> "$OUT/figures"
}

for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then
    run A "$BASE_BIN" "$round"; run B "$HEAD_BIN" "$round"
  else
    run B "$HEAD_BIN" "$round"; run A "$BASE_BIN" "$round"
  fi
done

echo "== $(date -u +%Y-%m-%d) on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "A = $A_NAME, B = this tree; PREFILL=$PREFILL MIX=$MIX ZIPF=$ZIPF DURATION=$DURATION CONNECTIONS=$CONNECTIONS KEYS=$KEYS"
python3 - "$OUT/figures" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def med(name, i):
    return statistics.median(float(r[i]) for r in rows if r[0] == name)
a, b = med("A", 1), med("B", 1)
print(f"median reads: A {a:.0f}/s ({med('A', 1) / med('A', 2):.2f} of its GET /), "
      f"B {b:.0f}/s ({med('B', 1) / med('B', 2):.2f} of its GET /); B/A = {b / a:.2f}")
ca, cb = med("A", 3), med("B", 3)
print(f"median server CPU per read: A {ca:.1f} us (GET / {med('A', 4):.1f} us), "
      f"B {cb:.1f} us (GET / {med('B', 4):.1f} us); B/A = {cb / ca:.2f} "
      "(CPU per answer is what a machine with spare cores turns into rate; "
      "the rates above also depend on how much of the two cores the server got)")
EOF
echo "files: $OUT"
