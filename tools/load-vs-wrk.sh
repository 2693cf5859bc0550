#!/usr/bin/env bash
# Is dialproof-load the limit? Runs against one release server on
# loopback, each DURATION seconds with 50 connections on 2 threads:
#
#  ROUNDS times, alternating (the machine's other load varies):
#   a. wrk -t2 -c50 (TLS) on GET / : the service's 404, its cheapest route;
#   b. dialproof-load, closed loop at 50, the same GET / (mix get=1);
#  then once:
#   c. dialproof-load, open loop at OPEN_RATE on GET /: does it keep the
#      schedule (requests never sent, how late they left)?
#   d. dialproof-load, closed loop at 50, reads of real verifications
#      (mix read=1 over KEYS keys made by --setup-local): the service's GET
#      rate on its API (auth, rate limit, database read).
#
# Then it prints b/a, whether the two tools agree on the same route, and
# b/d, how far above the API's GET rate the generator can drive, and the
# server's own request count against the sum the two tools reported.
#
#   bash tools/load-vs-wrk.sh
#   DURATION=20 ROUNDS=3 bash tools/load-vs-wrk.sh
#
# Needs wrk (apt-get install wrk) and python3 (reads the JSON reports).
# Everything stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-50}
KEYS=${KEYS:-60}
ROUNDS=${ROUNDS:-2}
OPEN_RATE=${OPEN_RATE:-30000}

command -v wrk >/dev/null || { echo "wrk missing: apt-get install wrk" >&2; exit 1; }
cargo build --release -q --workspace --bins
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/dialproof
LOAD=${CARGO_TARGET_DIR:-$PWD/target}/release/dialproof-load
DIR=$(mktemp -d /tmp/dialproof-load-vs-wrk.XXXXXX)
trap 'kill "$SERVER" 2>/dev/null || true; wait 2>/dev/null || true' EXIT

cat > "$DIR/dialproof.toml" <<EOF
[server]
https_listen = "127.0.0.1:0"
workers = 2
[storage]
data_dir = "$DIR/data"
[[lines]]
name = "bench"
mode = "always_up"
numbers = [ { range_start = "+74950000000", count = 10000, pool = "domestic" } ]
EOF

"$BIN" --config "$DIR/dialproof.toml" serve > "$DIR/stdout" 2> "$DIR/stderr" &
SERVER=$!
for _ in $(seq 100); do grep -q READY "$DIR/stdout" && break; sleep 0.1; done
HTTPS=$(sed -n 's/.*https=\([^ ]*\).*/\1/p' "$DIR/stdout")
echo "server: $(head -1 "$DIR/stdout") (pid $SERVER)"

field() { # json-file python-expression-on-r
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"
}

WRK_ALL=(); LOAD_ALL=()
for round in $(seq "$ROUNDS"); do
  echo "== round $round: wrk -t2 -c$CONNECTIONS -d${DURATION}s --latency https://$HTTPS/"
  wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency "https://$HTTPS/" | tee "$DIR/wrk$round.txt"
  WRK_ALL+=("$(awk '/^Requests\/sec:/ { print $2 }' "$DIR/wrk$round.txt")")

  echo "== round $round: dialproof-load --mix get=1 --path / --concurrency $CONNECTIONS --threads 2"
  "$LOAD" --target "https://$HTTPS" --cacert "$DIR/data/tls/cert.pem" --mix get=1 --path / \
    --concurrency "$CONNECTIONS" --threads 2 --duration "$DURATION" --quiet --json "$DIR/get$round.json"
  LOAD_ALL+=("$(field "$DIR/get$round.json" "round(r['throughput_per_second'])")")
done

echo "== open loop: dialproof-load --rate $OPEN_RATE --connections $CONNECTIONS --mix get=1 (is the schedule kept?)"
"$LOAD" --target "https://$HTTPS" --cacert "$DIR/data/tls/cert.pem" --mix get=1 --path / \
  --rate "$OPEN_RATE" --connections "$CONNECTIONS" --threads 2 --duration "$DURATION" --quiet --json "$DIR/get-open.json"

echo "== API reads: dialproof-load --mix read=1 --concurrency $CONNECTIONS --threads 2 --setup-local $KEYS"
"$LOAD" --target "https://$HTTPS" --cacert "$DIR/data/tls/cert.pem" --mix read=1 \
  --setup-local "$KEYS" --config "$DIR/dialproof.toml" --dialproof-bin "$BIN" \
  --concurrency "$CONNECTIONS" --threads 2 --duration "$DURATION" --quiet --json "$DIR/read.json"
READ_RPS=$(field "$DIR/read.json" "round(r['operations']['read']['ok_per_second'])")
READ_ERRORS=$(field "$DIR/read.json" "r['errors']")

mean() { python3 -c "import sys; v=[float(x) for x in sys.argv[1:]]; print(round(sum(v)/len(v)))" "$@"; }
WRK_RPS=$(mean "${WRK_ALL[@]}")
LOAD_RPS=$(mean "${LOAD_ALL[@]}")
echo "== summary (${DURATION}s runs, $CONNECTIONS connections, 2 threads each; load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
for round in $(seq "$ROUNDS"); do
  i=$((round - 1))
  echo "round $round GET / (404): wrk ${WRK_ALL[$i]} req/s," \
    "p50/p90/p99 $(awk '$1 == "50%" { a = $2 } $1 == "90%" { b = $2 } $1 == "99%" { c = $2 } END { print a "/" b "/" c }' "$DIR/wrk$round.txt");" \
    "dialproof-load ${LOAD_ALL[$i]} req/s," \
    "p50/p90/p99 $(field "$DIR/get$round.json" "'/'.join(f\"{r['all_responses_ms'][k]}ms\" for k in ('p50', 'p90', 'p99'))")"
done
echo "mean GET /: wrk $WRK_RPS req/s, dialproof-load $LOAD_RPS req/s (load/wrk = $(python3 -c "print(round($LOAD_RPS / $WRK_RPS, 2))"))"
echo "open loop at $OPEN_RATE/s: $(field "$DIR/get-open.json" "f\"{r['sent']} sent, {round(r['throughput_per_second'])} answers/s, {r['unsent_at_end']} unsent; latency from the intended time p50/p99/p99.9 {r['all_responses_ms']['p50']}/{r['all_responses_ms']['p99']}/{r['all_responses_ms']['p99_9']} ms; send lag p99 {r['send_lag_ms']['p99']} ms\"")"
echo "API reads (auth, limit, database): $READ_RPS ok/s ($READ_ERRORS errors)"
echo "GET / by dialproof-load / API read rate = $(python3 -c "print(round($LOAD_RPS / $READ_RPS, 2))")x"
# An independent count: the server's own request counter (logged when it
# stops) against what the clients reported. wrk does not count the
# requests in flight when it stops (at most CONNECTIONS a run), so the
# server may count up to that many more per wrk run.
kill -TERM "$SERVER"; wait "$SERVER" || true
SERVER_COUNT=$(grep -o 'http_requests [0-9]*' "$DIR/stderr" | tail -1 | cut -d' ' -f2)
CLIENT_COUNT=$(python3 -c "
import glob, json, re, sys
d = sys.argv[1]
n = sum(int(re.search(r'(\d+) requests in', open(f).read()).group(1)) for f in glob.glob(d + '/wrk*.txt'))
n += sum(json.load(open(f))['answered'] for f in glob.glob(d + '/get*.json') + [d + '/read.json'])
print(n)" "$DIR")
echo "server counted $SERVER_COUNT requests; wrk + dialproof-load reported $CLIENT_COUNT" \
  "(difference $((SERVER_COUNT - CLIENT_COUNT)), at most $((ROUNDS * CONNECTIONS)) expected from wrk)"
echo "files: $DIR"
