#!/usr/bin/env bash
# Dialproof against an axum + tokio + sqlx implementation of the same API
# (benches/axum-baseline, its own package, not a workspace member), in the
# same run, with the same wrk Lua script (issue 13). Both release builds
# serve HTTPS on 127.0.0.1 with 2 worker threads and SQLite in WAL; each
# gets KEYS keys (limits raised to 100000/min so the throttle is not what
# is measured) and a development URL on loopback as its company's webhook
# target (nothing is ever sent: creates are neither called nor cancelled,
# and their TTL, 600 s, outlasts the run).
#
#  ROUNDS times, alternating the servers (the machine's other load varies):
#   a. create: wrk -t2 -c50 POST /api/v1/verifications/, each request with
#      the next of the KEYS keys (committed before its 201 on both sides);
#   b. GET /api/v1/verifications/<id>/ of the verification each key made
#      before the rounds (one hot id per key);
#   c. GET of a random id, with a random key, among the WORKING_SET
#      verifications (default 150000) created on each server before the
#      rounds: what clients that poll the verifications they created in the
#      last minutes do. Both servers get the same count, created by wrk with
#      the create body (untimed); the ids come from each server's database.
#      WORKING_SET=0 leaves this out. Each create round adds newer
#      verifications, and Dialproof holds the newest pending ones in
#      memory within a bound (about 95,000); a verification the creates
#      have pushed out is read from SQLite, and a copy is kept for its
#      next polls (up to 229,376 copies). So the working-set lines say
#      what share of Dialproof's reads memory answered in that round
#      (its /metrics on the ops listener, before and after): the first
#      round reads each id from SQLite once. Before c, Dialproof's
#      cheapest route (GET /, a 404, no key) runs as long, and the
#      working-set lines give the reads' rate as a share of it.
#
# Then a table of req/s per server per round, the ratio Dialproof/axum for
# create and GET, the medians, the non-2xx answers (wrk counts status >= 400
# as "Non-2xx or 3xx"), socket errors, and the rows each database holds.
#
#   bash tools/create-vs-axum.sh
#   DURATION=20 ROUNDS=3 bash tools/create-vs-axum.sh
#
# POOL is each server's domestic number pool: 50000 per second of creates
# measured (Dialproof makes about 30000/s here), at most 1048000 (Dialproof
# holds at most 2^20 numbers). It must exceed every create of the run, or
# the 503s show as non-2xx: the default is 50000 x DURATION x ROUNDS plus
# WORKING_SET, and DURATION x ROUNDS of 30 (10 s x 3 rounds) is about the
# most that fits at 30000 creates/s. Needs wrk (apt-get install wrk), curl and python3. Everything
# stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
KEYS=${KEYS:-40}
CONNECTIONS=${CONNECTIONS:-50}
# wrk needs at least one connection per thread: CONNECTIONS=1 is a client
# that sends one request at a time.
WRK_THREADS=$((CONNECTIONS < 2 ? CONNECTIONS : 2))
WORKING_SET=${WORKING_SET:-150000}
POOL_MAX=1048000
POOL=${POOL:-$((50000 * DURATION * ROUNDS + WORKING_SET < POOL_MAX ? 50000 * DURATION * ROUNDS + WORKING_SET : POOL_MAX))}
# A development URL on loopback's discard port: accepted by both servers'
# SSRF rules, and no webhook is ever due during the run.
WEBHOOK_URL=http://127.0.0.1:9/hook

for tool in wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "$tool missing: apt-get install $tool" >&2; exit 1; }
done
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release -q -p dialproof --bins
cargo build --release -q --manifest-path benches/axum-baseline/Cargo.toml --target-dir "$TARGET"
BIN=$TARGET/release/dialproof
AXUM=$TARGET/release/axum-baseline
DIR=$(mktemp -d /tmp/dialproof-create-vs-axum.XXXXXX)
DP=; AX=
trap 'kill $DP $AX 2>/dev/null || true; wait 2>/dev/null || true' EXIT
echo "files: $DIR; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

wait_ready() { # stdout-file pid
  for _ in $(seq 100); do
    grep -q READY "$1" && { sed -n 's/.*https=\([^ ]*\).*/\1/p' "$1"; return; }
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "server did not start: $1" >&2; exit 1
}

# --- Dialproof: its config, then a company and keys by its operator CLI.
cat > "$DIR/dialproof.toml" <<EOF
[server]
https_listen = "127.0.0.1:0"
ops_listen = "127.0.0.1:0"
workers = 2
[storage]
data_dir = "$DIR/data"
[[lines]]
name = "bench"
mode = "always_up"
numbers = [
$(# Dialproof takes at most 1000000 numbers per range: +7495n000000...
  for ((n = 0; n * 1000000 < POOL; n++)); do
    left=$((POOL - n * 1000000))
    echo "  { range_start = \"+7495${n}000000\", count = $((left > 1000000 ? 1000000 : left)), pool = \"domestic\" },"
  done)
  { range_start = "+442030000000", count = 10, pool = "international" },
]
EOF
"$BIN" --config "$DIR/dialproof.toml" serve > "$DIR/dialproof.out" 2> "$DIR/dialproof.err" &
DP=$!
DP_ADDR=$(wait_ready "$DIR/dialproof.out" "$DP")
DP_OPS=$(sed -n 's/.* ops=\([^ ]*\).*/\1/p' "$DIR/dialproof.out")
[ -n "$DP_OPS" ] || { echo "no ops= on Dialproof's READY line (the ops listener is how the held share is read)" >&2; exit 1; }
# reads_from: "memory sqlite", Dialproof's GETs of one verification so far
# by where they were answered.
reads_from() {
  curl -sS --fail "http://$DP_OPS/metrics" | awk '
    /^dialproof_verification_reads_total\{from="memory"\}/ { m = $2 }
    /^dialproof_verification_reads_total\{from="sqlite"\}/ { s = $2 }
    END { if (m == "" || s == "") exit 1; print m, s }' || {
    echo "no dialproof_verification_reads_total{from=\"memory\"|\"sqlite\"} on http://$DP_OPS/metrics (the held share is read from it)" >&2
    exit 1
  }
}
op() { "$BIN" --config "$DIR/dialproof.toml" --json "$@"; }
json() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])$1)"; }
COMPANY=$(op company create --name bench | json "['id']")
op company dev-urls "$COMPANY" "$WEBHOOK_URL" > /dev/null
for i in $(seq "$KEYS"); do
  KEY=$(op key create --company "$COMPANY" --label "bench-$i")
  op key set-limit "$(echo "$KEY" | json "['prefix']")" 100000 > /dev/null
  echo "$KEY" | json "['token']"
done > "$DIR/dialproof.keys"

# --- axum: its setup mode prints the tokens.
"$AXUM" setup --db "$DIR/axum.db" --keys "$KEYS" --rate-limit 100000 --dev-url "$WEBHOOK_URL" \
  > "$DIR/axum.keys"
"$AXUM" serve --db "$DIR/axum.db" --listen 127.0.0.1:0 --cert-dir "$DIR/axum-tls" \
  --domestic "$POOL" --international 10 > "$DIR/axum.out" 2> "$DIR/axum.err" &
AX=$!
AX_ADDR=$(wait_ready "$DIR/axum.out" "$AX")
echo "dialproof on https://$DP_ADDR (pid $DP), axum-baseline on https://$AX_ADDR (pid $AX)"

BODY="{\"phone\":\"+79123456789\",\"webhook_url\":\"$WEBHOOK_URL\",\"client_ref\":\"bench\",\"ttl_seconds\":600}"
# One verification per key on each server, for the GET runs (and a check
# that both answer 201 to the body the creates send).
make_ids() { # name addr cacert
  while read -r token; do
    curl -sS --fail-with-body --cacert "$3" "https://$2/api/v1/verifications/" \
      -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$BODY" \
      | grep -o '"verification_id":"[^"]*"' | cut -d'"' -f4
  done < "$DIR/$1.keys" > "$DIR/$1.ids"
  [ "$(grep -c ^ver_ "$DIR/$1.ids")" = "$KEYS" ] || { echo "$1: setup creates failed" >&2; exit 1; }
}
make_ids dialproof "$DP_ADDR" "$DIR/data/tls/cert.pem"
make_ids axum "$AX_ADDR" "$DIR/axum-tls/cert.pem"

# The one script both servers get. MODE picks the request: create, get
# (key i with the id key i made; every request string built once per
# thread), getws (a random id of IDS_FILE, each id's request built once
# per thread with a key drawn at random, then sent in random order) or
# prefill (creates until this thread has had QUOTA answers). Requests
# are built before the timed run: building one as it is sent is wrk's
# work on the two cores the servers share, which weighs more against the
# faster server (benches/README.md has the figures of both forms).
cat > "$DIR/bench.lua" <<EOF
local mode = os.getenv("MODE")
local quota = tonumber(os.getenv("QUOTA") or "0")
local keys, ids, reqs, auths = {}, {}, {}, {}
for line in io.lines(os.getenv("KEYS_FILE")) do keys[#keys + 1] = line end
for line in io.lines(os.getenv("IDS_FILE")) do ids[#ids + 1] = line end
local body = '$BODY'
local threads = 0
local answered = 0
function setup(thread)
  thread:set("first", threads)
  threads = threads + 1
end
function response(status, headers, body)
  if quota > 0 then
    answered = answered + 1
    if answered >= quota then wrk.thread:stop() end
  end
end
function init(args)
  math.randomseed(1000 + (first or 0))
  for i, key in ipairs(keys) do
    local auth = "Bearer " .. key
    auths[i] = { ["Authorization"] = auth }
    if mode == "create" or mode == "prefill" then
      reqs[i] = wrk.format("POST", "/api/v1/verifications/",
        { ["Authorization"] = auth, ["Content-Type"] = "application/json" }, body)
    elseif mode == "get" then
      reqs[i] = wrk.format("GET", "/api/v1/verifications/" .. ids[i] .. "/", auths[i])
    end
  end
  if mode == "root" then
    reqs = { wrk.format("GET", "/") }
  elseif mode == "getws" then
    for i, id in ipairs(ids) do
      reqs[i] = wrk.format("GET", "/api/v1/verifications/" .. id .. "/", auths[math.random(#auths)])
    end
  end
  -- The threads start half the keys apart, then go round-robin.
  n = (first or 0) * math.floor(#reqs / 2)
end
function request()
  if mode == "getws" then
    return reqs[math.random(#reqs)]
  end
  n = n + 1
  return reqs[n % #reqs + 1]
end
EOF

# The working set: WORKING_SET creates on each server (wrk stops each
# thread at its share of answers), then every id each database holds
# beyond the per-key ones (the first WORKING_SET pending, by id), so both
# servers are read over the same count.
prefill() { # name addr database
  [ "$WORKING_SET" -gt 0 ] || return 0
  MODE=prefill QUOTA=$((WORKING_SET / WRK_THREADS + 1)) KEYS_FILE="$DIR/$1.keys" IDS_FILE="$DIR/$1.ids" \
    wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d600s -s "$DIR/bench.lua" "https://$2/" > "$DIR/prefill-$1.txt" &
  local wrk_pid=$!
  # wrk's main thread sleeps out its duration even when every thread has
  # stopped; SIGINT ends it once the database holds the working set.
  until python3 -c 'import sqlite3, sys
n = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True).execute(
    "SELECT count(*) FROM verifications").fetchone()[0]
sys.exit(0 if n >= int(sys.argv[2]) else 1)' "$3" $((WORKING_SET + KEYS)); do
    kill -0 "$wrk_pid" 2>/dev/null || { echo "$1: wrk ended before the working set was made" >&2; exit 1; }
    sleep 1
  done
  kill -INT "$wrk_pid"; wait "$wrk_pid" || true
  python3 - "$3" "$DIR/$1.ids" "$WORKING_SET" > "$DIR/$1.ws" <<'PY'
import sqlite3, sys
db, own, want = sys.argv[1], set(open(sys.argv[2]).read().split()), int(sys.argv[3])
rows = sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(
    "SELECT id FROM verifications WHERE status = 'pending' ORDER BY id").fetchall()
ids = [r[0] for r in rows if r[0] not in own]
if len(ids) < want:
    sys.exit(f"{db}: {len(ids)} pending verifications after the prefill, {want} wanted")
print("\n".join(ids[:want]))
PY
  echo "$1: working set of $(grep -c ^ver_ "$DIR/$1.ws") pending verifications"
}
prefill dialproof "$DP_ADDR" "$DIR/data/dialproof.db"
prefill axum "$AX_ADDR" "$DIR/axum.db"

run() { # mode name addr round
  local ids="$DIR/$2.ids"
  [ "$1" = getws ] && ids="$DIR/$2.ws"
  MODE=$1 KEYS_FILE="$DIR/$2.keys" IDS_FILE="$ids" \
    wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$DIR/bench.lua" "https://$3/" \
    > "$DIR/$1-$2-$4.txt"
  awk -v label="$1 $2 round $4" '
    /^Requests\/sec:/ { rps = $2 }
    /Non-2xx or 3xx responses:/ { bad = $5 }
    /Socket errors:/ { sock = $0; sub(/.*Socket errors: */, "", sock) }
    $1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 }
    END { printf "%-28s %10.0f req/s  p50 %s  p99 %s  non-2xx %d%s\n", label, rps, p50, p99, bad, (sock ? "  socket errors: " sock : "") }' \
    "$DIR/$1-$2-$4.txt"
}

# run_counted MODE ROUND: a GET run on Dialproof, and the share of its
# reads that memory answered (the rest read SQLite) in a file for the
# summary.
run_counted() {
  local before
  before=$(reads_from)
  run "$1" dialproof "$DP_ADDR" "$2"
  echo "$before $(reads_from)" | awk '{ m = $3 - $1; s = $4 - $2; printf "%.3f\n", (m + s) ? m / (m + s) : 0 }' \
    > "$DIR/$1-dialproof-$2.held"
  echo "  of which answered from memory: $(awk '{ printf "%.0f %%", 100 * $1 }' "$DIR/$1-dialproof-$2.held")"
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  run create dialproof "$DP_ADDR" "$round"
  run create axum "$AX_ADDR" "$round"
  run_counted get "$round"
  run get axum "$AX_ADDR" "$round"
  if [ "$WORKING_SET" -gt 0 ]; then
    run root dialproof "$DP_ADDR" "$round"
    run_counted getws "$round"
    run getws axum "$AX_ADDR" "$round"
  fi
done

echo "== summary: wrk -t$WRK_THREADS -c$CONNECTIONS -d${DURATION}s, $KEYS keys, $ROUNDS rounds; load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$DIR" "$ROUNDS" "$WORKING_SET" <<'EOF'
import re, sqlite3, statistics, sys
d, rounds, ws = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def wrk(mode, name, r):
    t = open(f"{d}/{mode}-{name}-{r}.txt").read()
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", t)
    return (float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1)),
            int(bad.group(1)) if bad else 0,
            sum(map(int, sock.groups())) if sock else 0,
            int(re.search(r"(\d+) requests in", t).group(1)))
print(f"{'':8} {'create dialproof':>16} {'create axum':>12} {'ratio':>6}   {'GET dialproof':>13} {'GET axum':>9} {'ratio':>6}   Dialproof's GETs from memory")
cols = {k: [] for k in ("cd", "ca", "cr", "gd", "ga", "gr")}
bad = {}
for r in range(1, rounds + 1):
    (cd, *bcd), (ca, *bca) = wrk("create", "dialproof", r), wrk("create", "axum", r)
    (gd, *bgd), (ga, *bga) = wrk("get", "dialproof", r), wrk("get", "axum", r)
    for k, v in (("create dialproof", bcd), ("create axum", bca), ("GET dialproof", bgd), ("GET axum", bga)):
        bad[k] = [a + b for a, b in zip(bad.get(k, [0, 0, 0]), v)]
    for k, v in zip(cols, (cd, ca, cd / ca, gd, ga, gd / ga)):
        cols[k].append(v)
    held = float(open(f"{d}/get-dialproof-{r}.held").read())
    print(f"round {r:<2} {cd:16.0f} {ca:12.0f} {cd / ca:6.2f}   {gd:13.0f} {ga:9.0f} {gd / ga:6.2f}   {100 * held:.0f} %")
m = {k: statistics.median(v) for k, v in cols.items()}
print(f"median   {m['cd']:16.0f} {m['ca']:12.0f} {m['cd'] / m['ca']:6.2f}   {m['gd']:13.0f} {m['ga']:9.0f} {m['gd'] / m['ga']:6.2f}"
      f"   (median of the per-round ratios: create {m['cr']:.2f}, GET {m['gr']:.2f})")
if ws:
    print(f"GET of a random id among {ws} pending verifications (the working set):")
    print(f"{'':8} {'dialproof':>16} {'axum':>12} {'ratio':>6}   {'of its GET /':>12}   Dialproof's reads answered from memory")
    wd, wa, wr = [], [], []
    for r in range(1, rounds + 1):
        (d_, *bd), (a_, *ba) = wrk("getws", "dialproof", r), wrk("getws", "axum", r)
        for k, v in (("GET working set dialproof", bd), ("GET working set axum", ba)):
            bad[k] = [a + b for a, b in zip(bad.get(k, [0, 0, 0]), v)]
        root = wrk("root", "dialproof", r)[0]
        wd.append(d_); wa.append(a_); wr.append(d_ / root)
        held = float(open(f"{d}/getws-dialproof-{r}.held").read())
        print(f"round {r:<2} {d_:16.0f} {a_:12.0f} {d_ / a_:6.2f}   {d_ / root:12.2f}   {100 * held:.0f} %")
    md, ma = statistics.median(wd), statistics.median(wa)
    print(f"median   {md:16.0f} {ma:12.0f} {md / ma:6.2f}   {statistics.median(wr):12.2f}"
          f"   (median of the per-round ratios: {statistics.median(x / y for x, y in zip(wd, wa)):.2f})")
for k, (non2xx, sock, total) in bad.items():
    print(f"{k}: {total} requests, {non2xx} non-2xx, {sock} socket errors")
for name, db in (("dialproof", f"{d}/data/dialproof.db"), ("axum", f"{d}/axum.db")):
    n = sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("SELECT count(*) FROM verifications").fetchone()[0]
    print(f"{name} database: {n} verifications")
EOF
