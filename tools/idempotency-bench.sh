#!/usr/bin/env bash
# What an Idempotency-Key costs, over HTTPS against one release server on
# loopback, all in one run (the machine's other load varies, so every
# ratio compares figures measured minutes apart at most):
#
#  ROUNDS times, alternating A B B A:
#   A. creates without a key: dialproof-load --mix create=1, closed loop,
#      CONNECTIONS connections;
#   B. the same with a fresh key per create (--idempotency-keys).
#  Then once:
#   C. replays against GETs: --mix create=1,read=4 --idempotency-keys
#      --replay-share 0.8, so about 16 % of requests are replays of earlier
#      keyed creates and 80 % GETs of known verifications, interleaved on
#      the same connections; the report times each operation apart.
#
# It prints each round's creates per second, B/A per pair and their median
# (the target: B within 10 % of A), and C's replay against GET latencies
# (the target: a replay at least as fast as a GET).
#
#   bash tools/idempotency-bench.sh
#   DURATION=20 ROUNDS=3 CONNECTIONS=8 bash tools/idempotency-bench.sh
#
# Needs python3 (reads the JSON reports). Everything stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-50}
KEYS=${KEYS:-40}
ROUNDS=${ROUNDS:-2}
NUMBERS=${NUMBERS:-600000}

cargo build --release -q --workspace --bins
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
BIN=$TARGET/release/dialproof
LOAD=$TARGET/release/dialproof-load
DIR=$(mktemp -d /tmp/dialproof-idempotency-bench.XXXXXX)
trap 'kill "$SERVER" 2>/dev/null || true; wait 2>/dev/null || true' EXIT

# shellcheck source=tools/bench-server.sh
. tools/bench-server.sh
# A pool large enough that no round runs out of numbers while earlier
# rounds' verifications (30 s TTL) still hold theirs.
start_bench_server "$DIR" "$BIN" "$NUMBERS"
echo "server: $(head -1 "$DIR/stdout") (pid $SERVER); $(date -u +%F), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"


KEYFILE="$DIR/keys.txt"
load() { # name extra-args...
  local name=$1; shift
  "$LOAD" --target "https://$HTTPS" --cacert "$DIR/data/tls/cert.pem" \
    --config "$DIR/dialproof.toml" --dialproof-bin "$BIN" --ttl 30 \
    --concurrency "$CONNECTIONS" --threads 2 --duration "$DURATION" --quiet \
    --json "$DIR/$name.json" "$@" > "$DIR/$name.txt"
  local errors
  errors=$(field "$DIR/$name.json" "r['errors']")
  if [ "$errors" != 0 ]; then
    echo "$name: $errors errors: $(field "$DIR/$name.json" "r['errors_by_kind']")" >&2
    exit 1
  fi
}

A=(); B=()
plain() {
  load "plain$1" --setup-local "$KEYS" --mix create=1
  A+=("$(field "$DIR/plain$1.json" "round(r['operations']['create']['ok_per_second'])")")
}
keyed() {
  load "keyed$1" --setup-local "$KEYS" --mix create=1 --idempotency-keys
  B+=("$(field "$DIR/keyed$1.json" "round(r['operations']['create']['ok_per_second'])")")
}
# A B, then B A: a series loads the machine more as it goes.
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then plain "$round"; keyed "$round"; else keyed "$round"; plain "$round"; fi
  echo "round $round: creates/s without a key ${A[-1]}, with a fresh key ${B[-1]}"
done
python3 - "${A[*]}" "${B[*]}" <<'EOF'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ratios = [y / x for x, y in zip(a, b)]
print("keyed/plain per round:", " ".join(f"{r:.3f}" for r in ratios),
      f"median {statistics.median(ratios):.3f} (target >= 0.90)")
EOF

load replay --setup-local "$KEYS" --mix create=1,read=4 --idempotency-keys --replay-share 0.8
python3 - "$DIR/replay.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
ops = r["operations"]
for name in ("replay", "read"):
    o = ops[name]
    l = o["latency_ms"]
    print(f"{name:>7}: {o['ok']} ok, {o['ok_per_second']:.0f}/s, "
          f"p50 {l['p50']:.3f} ms, p99 {l['p99']:.3f} ms, mean {l['mean']:.3f} ms")
rp, rd = ops["replay"]["latency_ms"], ops["read"]["latency_ms"]
print(f"replay/GET latency: p50 {rp['p50'] / rd['p50']:.3f}, p99 {rp['p99'] / rd['p99']:.3f}, "
      f"mean {rp['mean'] / rd['mean']:.3f} (target <= 1.0)")
EOF
echo "reports: $DIR"
