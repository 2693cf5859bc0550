#!/usr/bin/env bash
# A client that creates one verification at a time: two builds of the
# service, alternating A B A B (the machine's other load varies), each run
# on a fresh server and an empty database with dialproof-load --concurrency
# 1 --mix create=1 for DURATION seconds. Prints each run's rate, latency
# percentiles and mean, the server's CPU per create (in all and by thread,
# the storage writer's apart), and the medians and B/A. This is the case
# where a create's own waits show (a batching window, a wake-up, work
# between two batches), since nothing else shares them.
#
#   A_BIN=path/to/old/dialproof bash tools/lone-create-ab.sh
#   A_BIN=... B_BIN=... ROUNDS=4 DURATION=10 bash tools/lone-create-ab.sh
#   A_BIN=... CONNECTIONS=50 bash tools/lone-create-ab.sh   # many clients
#
# CONNECTIONS (default 1) clients create at once, over as many keys (at
# most 20, so no key's rate limit is what is measured), on 2 load threads
# when more than one.
#
# B_BIN defaults to this tree's release build (built first). Everything
# stays on 127.0.0.1. Needs python3 (reads the JSON reports).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${A_BIN:?give A_BIN, the baseline dialproof binary}"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-1}
KEYS=$((CONNECTIONS < 20 ? CONNECTIONS : 20))
THREADS=$((CONNECTIONS > 1 ? 2 : 1))
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p dialproof -p dialproof-tools
B_BIN=${B_BIN:-$TARGET/release/dialproof}
LOAD=$TARGET/release/dialproof-load
OUT=$(mktemp -d /tmp/dialproof-lone-create.XXXXXX)
SERVER=""
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null || true' EXIT

# shellcheck source=tools/bench-server.sh
. tools/bench-server.sh

# run NAME BINARY ROUND
run() {
  local name=$1 bin=$2 round=$3 dir="$OUT/$1-$3"
  start_bench_server "$dir" "$bin" $((200000 * CONNECTIONS < 600000 ? 200000 * CONNECTIONS : 600000))
  local threads_before
  threads_before=$(thread_ticks "$SERVER")
  "$LOAD" --target "https://$HTTPS" --cacert "$dir/data/tls/cert.pem" --setup-local "$KEYS" \
    --config "$dir/dialproof.toml" --dialproof-bin "$bin" --concurrency "$CONNECTIONS" --threads "$THREADS" \
    --duration "$DURATION" --mix create=1 --ttl 3600 --server-pid "$SERVER" --quiet \
    --json "$dir/create.json"
  # By thread, over the whole load run (its setup writes through the CLI,
  # not this server): where a create's CPU goes, the writer's share apart.
  local by_thread
  by_thread=$(thread_us_per "$threads_before" "$(thread_ticks "$SERVER")" \
    "$(field "$dir/create.json" "r['operations']['create']['ok']")")
  stop_bench_server
  local l="r['operations']['create']['latency_ms']"
  echo "$name round $round: $(field "$dir/create.json" "round(r['operations']['create']['ok_per_second'])") creates/s," \
    "p50/p99/p99.9 $(field "$dir/create.json" "f\"{$l['p50']}/{$l['p99']}/{$l['p99_9']}\"") ms," \
    "mean $(field "$dir/create.json" "round($l['mean'], 3)") ms," \
    "server CPU $(field "$dir/create.json" "round(r['server_cpu']['per_answer_us'])") us per create" \
    "(by thread: $by_thread)" | tee -a "$OUT/summary"
  local writer
  writer=$(echo "$by_thread" | tr ',' '\n' | awk '$1 == "db-writer" { print $2 }')
  echo "$name $(field "$dir/create.json" "r['operations']['create']['ok_per_second']") $(field "$dir/create.json" "$l['mean']") $(field "$dir/create.json" "$l['p99']") $(field "$dir/create.json" "r['server_cpu']['per_answer_us']") ${writer:-0}" >> "$OUT/figures"
}

for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then
    run A "$A_BIN" "$round"; run B "$B_BIN" "$round"
  else
    run B "$B_BIN" "$round"; run A "$A_BIN" "$round"
  fi
done

echo "== $(date -u +%Y-%m-%d) on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); DURATION=$DURATION CONNECTIONS=$CONNECTIONS"
python3 - "$OUT/figures" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def med(name, i):
    return statistics.median(float(r[i]) for r in rows if r[0] == name)
for i, what in ((1, "creates/s"), (2, "mean ms"), (3, "p99 ms"), (4, "server CPU us per create"),
                (5, "storage writer CPU us per create")):
    a, b = med("A", i), med("B", i)
    print(f"median {what}: A {a:.3f}, B {b:.3f}, B/A {b / a:.2f}")
EOF
echo "files: $OUT"
