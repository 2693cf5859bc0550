#!/usr/bin/env bash
# INVITE-to-final-response throughput and latency of the release binary,
# with sipp as the provider's gateway over loopback UDP.
#
#   bash tools/sip-bench.sh            # defaults below
#   RATE=3000 CALLS=30000 LEASED=2000 bash tools/sip-bench.sh
#
# Two runs against one server:
#  1. "unleased": CALLS calls at RATE/s to a configured number that is not
#     leased: the whole SIP path (parse, source check, lease lookup,
#     603, ACK absorbed) without a database write.
#  2. "leased": LEASED verifications are created over HTTPS first (the
#     line has exactly LEASED numbers, so every one is leased), then one
#     call to each number at RATE/s: each INVITE completes a verification
#     through the group-commit writer before its 603 goes out. Their
#     webhooks go to dialproof-webhook-receiver on loopback, registered as
#     the company's development URL (nothing leaves the machine); the
#     script counts how many arrived with a valid signature, waiting up to
#     WEBHOOK_WAIT seconds (60) for the last, and prints the calls with
#     their webhooks a second (from the first leased call to the last
#     webhook: what a client sees end to end) and the server's CPU time
#     (user + system) over the same span, per completion: the cost of a
#     completion with its webhook, which a shared machine's other load
#     does not move the way it moves rates.
# sipp measures each call from its INVITE to the final response (rtd);
# the script prints the rate achieved, latency percentiles, the same in
# 250 ms slices, sipp's own CPU, and over the leased calls the cores used
# by sipp, idle and the server's threads slice by slice
# (tools/thread-slices.py). Needs sipp (apt-get install sip-tester), curl
# and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
# thread_ticks and thread_us_per: the server's CPU by thread.
# shellcheck source=tools/bench-server.sh
. tools/bench-server.sh

RATE=${RATE:-2000}
CALLS=${CALLS:-20000}
LEASED=${LEASED:-2000}
START=74950000000

command -v sipp >/dev/null || { echo "sipp missing: apt-get install sip-tester" >&2; exit 1; }
cargo build --release -q --workspace --bins
# DIALPROOF_BIN: another build of the service (an older commit's, for an
# A/B comparison; see tools/sip-ab.sh); the receiver stays this one.
BIN=${DIALPROOF_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/dialproof}
RECEIVER_BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/dialproof-webhook-receiver
DIR=$(mktemp -d /tmp/dialproof-sip-bench.XXXXXX)
RECEIVER=
trap 'kill "$SERVER" $RECEIVER 2>/dev/null || true; wait 2>/dev/null || true' EXIT

cat > "$DIR/dialproof.toml" <<EOF
[server]
https_listen = "127.0.0.1:0"
[storage]
data_dir = "$DIR/data"
[sip]
listen = "127.0.0.1:0"
[[lines]]
name = "bench"
mode = "always_up"
provider_addresses = ["127.0.0.1"]
numbers = [ { range_start = "+$START", count = $LEASED, pool = "domestic" } ]
EOF
# EXTRA_TOML: more configuration for an experiment, e.g.
# EXTRA_TOML=$'[webhooks]\nsender_threads = 4' (a section not written above).
if [ -n "${EXTRA_TOML:-}" ]; then printf '%s\n' "$EXTRA_TOML" >> "$DIR/dialproof.toml"; fi

DIALPROOF_LOG=info "$BIN" --config "$DIR/dialproof.toml" serve > "$DIR/stdout" 2> "$DIR/stderr" &
SERVER=$!
for _ in $(seq 100); do grep -q READY "$DIR/stdout" && break; sleep 0.1; done
READY=$(head -1 "$DIR/stdout")
HTTPS=$(sed -n 's/.*https=\([^ ]*\).*/\1/p' <<< "$READY")
SIP=$(sed -n 's/.*sip=\([^ ]*\).*/\1/p' <<< "$READY")
echo "server: $READY"

# The scenario: tests/sipp/call.xml with its placeholders filled.
sed -e 's/{{FROM_HEADER}}/<sip:89161234567@[local_ip]:[local_port]>/' \
    -e 's/{{HEADERS}}/X-Bench: 1/' -e 's/{{CODE}}/603/' \
    tests/sipp/call.xml > "$DIR/call.xml"
sed -e 's/\[service\]/[field0]/g' "$DIR/call.xml" > "$DIR/call_csv.xml"

run_sipp() { # name, extra args...
  local name=$1; shift
  # sipp's own CPU (user + system) as its subshell's reaped children's
  # time: on two cores the load generator's share is the service's lack.
  (cd "$DIR" && { sipp "$SIP" -nostdin -buff_size 4194304 -r "$RATE" -rp 1000 \
      -i 127.0.0.1 -p $((20000 + RANDOM % 20000)) -trace_rtt -rtt_freq 1 -timeout 120s "$@" > "$name.out" 2>&1
    awk '{ print $16 + $17 }' "/proc/$BASHPID/stat" > "$name.sipp-ticks"; }) || true
  local rtt
  rtt=$(ls -t "$DIR"/*_rtt.csv | head -1)
  echo "== $name"
  grep -E "Successful call|Failed call|Call Rate|Elapsed" "$DIR/$name.out" | tail -4 | sed 's/^/   /'
  awk -v hz="$(getconf CLK_TCK)" '{ printf "   sipp CPU over the run: %.2f s\n", $1 / hz }' "$DIR/$name.sipp-ticks"
  # rtt.csv: Date_ms;response_time_ms;rtd_no, whole milliseconds (sipp's
  # clock tick), so "0 ms" means under a millisecond.
  tail -n +2 "$rtt" | cut -d';' -f2 | sort -g | awk '
    { v[NR] = $1; if ($1 < 1) under++ }
    END { if (NR == 0) { print "   no samples"; exit }
          printf "   INVITE->final over %d calls: %.2f%% under 1 ms; p50 %d ms, p99 %d ms, p99.9 %d ms, max %d ms\n",
            NR, 100 * under / NR, v[int(NR*0.5)+1], v[int(NR*0.99)+1], v[int(NR*0.999)+1], v[NR] }'
  mv "$rtt" "$DIR/$name.rtt.csv"
  slices "$DIR/$name.rtt.csv"
}

# The same samples in 250 ms slices of the time they were answered: calls
# answered in the slice and their p99. A saturated run shows here whether
# it kept up (a flat p99) or fell behind and into retransmissions (a p99
# that climbs from the first slices: the storm that the total rate hides).
slices() {
  python3 - "$1" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]).read().splitlines()[1:]:
    f = line.split(";")
    if len(f) >= 2:
        rows.append((float(f[0]), float(f[1])))
if rows:
    t0, by = rows[0][0], {}
    for t, ms in rows:
        by.setdefault(int((t - t0) // 250), []).append(ms)
    cells = []
    for k in sorted(by):
        v = sorted(by[k])
        cells.append(f"{len(v)}/{v[int(len(v) * 0.99)]:.0f}")
    print("   by 250 ms (answered/p99 ms):", " ".join(cells))
PY
}

# 1. Unleased: a number of the line no verification holds (none yet).
run_sipp unleased -sf call.xml -s "+$START" -m "$CALLS"

# 2. Leased: create one verification per number, then call each once.
COMPANY_JSON=$("$BIN" --config "$DIR/dialproof.toml" --json company create --name bench)
COMPANY=$(sed -n 's/.*"id":\([0-9]*\).*/\1/p' <<< "$COMPANY_JSON")
SECRET=$(sed -n 's/.*"webhook_secret":"\([^"]*\)".*/\1/p' <<< "$COMPANY_JSON")
# The webhook receiver on loopback, verifying with the company's secret
# (from the environment, not the command line); its URL is registered as a
# development URL, so the service may send to it over plain http.
DIALPROOF_WEBHOOK_SECRET="$SECRET" "$RECEIVER_BIN" --listen 127.0.0.1:0 > "$DIR/webhooks.txt" 2>&1 &
RECEIVER=$!
for _ in $(seq 100); do grep -q READY "$DIR/webhooks.txt" && break; sleep 0.1; done
HOOK_BASE=$(sed -n 's/^READY //p' "$DIR/webhooks.txt")
"$BIN" --config "$DIR/dialproof.toml" company dev-urls "$COMPANY" "$HOOK_BASE" > /dev/null
TOKEN=$("$BIN" --config "$DIR/dialproof.toml" key create --company "$COMPANY" --label bench \
  | sed -n 's/.*token (shown once): //p')
"$BIN" --config "$DIR/dialproof.toml" key set-limit "${TOKEN:9:8}" 100000 > /dev/null
# One curl config block per create; `next` resets options, so every block
# names its own certificate and output.
{
  for i in $(seq "$LEASED"); do
    [ "$i" -gt 1 ] && echo next
    printf 'url = "https://%s/api/v1/verifications/"\n' "$HTTPS"
    printf 'header = "Authorization: Bearer %s"\nheader = "Content-Type: application/json"\n' "$TOKEN"
    printf 'data = "{\\"phone\\":\\"+79123456789\\",\\"webhook_url\\":\\"%s/hook\\",\\"ttl_seconds\\":600}"\n' "$HOOK_BASE"
    printf 'cacert = "%s"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\nsilent\n' "$DIR/data/tls/cert.pem"
  done
} > "$DIR/creates.curl"
CREATED=$(curl --parallel --parallel-max 32 -K "$DIR/creates.curl" | grep -c '^201$' || true)
echo "created $CREATED of $LEASED verifications"
# SETTLE: seconds to wait between the creates and the calls (0), to tell
# what the creates leave running (checkpoints, the held rows) from the
# calls' own cost.
sleep "${SETTLE:-0}"
{ echo SEQUENTIAL; for i in $(seq 0 $((LEASED - 1))); do echo "+$((START + i))"; done; } > "$DIR/numbers.csv"
# The server's CPU time (user + system, in clock ticks) from /proc.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$SERVER/stat"; }
received() { grep -c '^verification\.' "$DIR/webhooks.txt" || true; }
CPU_BEFORE=$(cpu_ticks)
THREADS_BEFORE=$(thread_ticks "$SERVER")
LEASED_START=$(date +%s.%N)
# Where the cores go during the calls, slice by slice (sipp, idle, the
# server's threads): printed after the call's figures.
python3 tools/thread-slices.py "$SERVER" > "$DIR/threads.txt" &
SLICES=$!
run_sipp leased -sf call_csv.xml -inf numbers.csv -m "$LEASED"
kill -TERM "$SLICES" 2>/dev/null || true
wait "$SLICES" || true
echo "   cores by 250 ms over the leased calls (tools/thread-slices.py):"
cat "$DIR/threads.txt"
echo "completed by calls: $(grep -c 'call completed' "$DIR/stderr" || true) (logged at info; see counters below)"
# The webhooks still on their way, for at most WEBHOOK_WAIT seconds: the
# CPU figure below covers every completion with its signed webhook.
SIPP_DONE=$(date +%s.%N)
for _ in $(seq $((${WEBHOOK_WAIT:-60} * 10))); do
  [ "$(received)" -ge "$LEASED" ] && break
  sleep 0.1
done
CPU_AFTER=$(cpu_ticks)
LAST_HOOK=$(date +%s.%N)
echo "webhooks received: $(received)," \
  "with a valid signature: $(grep -c ' valid$' "$DIR/webhooks.txt" || true)," \
  "the last $(awk -v a="$SIPP_DONE" -v b="$LAST_HOOK" 'BEGIN { printf "%.1f", b - a }') s after the last call"
# What a client sees end to end: calls answered and their webhooks
# delivered, a second, from the first leased call to the last webhook (the
# rate sipp reports counts the calls alone; at saturation the webhooks
# follow seconds later). The wait above looks every 0.1 s.
awk -v a="$LEASED_START" -v b="$LAST_HOOK" -v n="$(received)" 'BEGIN {
  printf "calls with their webhooks: %.0f a second (%d in %.2f s from the first leased call to the last webhook)\n",
    n / (b - a), n, b - a }'
awk -v t=$((CPU_AFTER - CPU_BEFORE)) -v hz="$(getconf CLK_TCK)" -v n="$LEASED" 'BEGIN {
  printf "server CPU from the first leased call to the last webhook: %.2f s, %.1f us per completion with its webhook\n",
    t / hz, 1e6 * t / hz / n }'
# The same CPU by thread, the busiest first: where a completion's time goes.
echo "  by thread (us per completion): $(thread_us_per "$THREADS_BEFORE" "$(thread_ticks "$SERVER")" "$LEASED")"
kill -TERM "$SERVER"; wait "$SERVER" || true
grep -o 'sip_invites=[^"]*' "$DIR/stderr" | tail -1
grep -o 'completed [0-9]*' "$DIR/stderr" | tail -1
echo "files: $DIR"
