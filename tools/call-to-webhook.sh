#!/usr/bin/env bash
# Call to webhook at a sustained rate (issue 13's target: p99 under 50 ms at
# 1 000 calls a second for a minute). One release server (2 workers) on
# loopback; dialproof-load opens the loop at RATE creates a second, places a
# SIP call (UDP INVITE, 603 read, ACK) to the dial number of every created
# verification, and its embedded receiver (the company's development URL)
# checks every webhook's signature and times call -> signed
# `verification.completed` received.
#
#   bash tools/call-to-webhook.sh                      # 1000/s for 60 s
#   RATE=500 DURATION=30 bash tools/call-to-webhook.sh
#   DIALPROOF_BIN=path/to/old/dialproof bash tools/call-to-webhook.sh   # another build's server
#
# Prints dialproof-load's report (the `call->hook` row is the figure) and
# the server's own view: group commits and the webhook queue at the end.
# The generator, the receiver and the service share the machine's cores.
# Everything stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-1000}
DURATION=${DURATION:-60}
KEYS=${KEYS:-20}
CONNECTIONS=${CONNECTIONS:-64}

cargo build --release -q --workspace --bins
# DIALPROOF_BIN: another build of the service (an A/B comparison); the
# load generator stays this tree's.
BIN=${DIALPROOF_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/dialproof}
LOAD=${CARGO_TARGET_DIR:-$PWD/target}/release/dialproof-load
DIR=$(mktemp -d /tmp/dialproof-call-to-webhook.XXXXXX)
trap 'kill "$SERVER" 2>/dev/null || true; wait 2>/dev/null || true' EXIT

# Enough numbers that no create waits for one: a call releases its number
# within milliseconds, so a few thousand cover any backlog.
cat > "$DIR/dialproof.toml" <<EOF
[server]
https_listen = "127.0.0.1:0"
ops_listen = "127.0.0.1:0"
workers = 2
[storage]
data_dir = "$DIR/data"
[sip]
listen = "127.0.0.1:0"
[[lines]]
name = "bench"
mode = "always_up"
provider_addresses = ["127.0.0.1"]
numbers = [ { range_start = "+74950000000", count = 20000, pool = "domestic" } ]
EOF

"$BIN" --config "$DIR/dialproof.toml" serve > "$DIR/stdout" 2> "$DIR/stderr" &
SERVER=$!
for _ in $(seq 100); do grep -q READY "$DIR/stdout" && break; sleep 0.1; done
READY=$(head -1 "$DIR/stdout")
HTTPS=$(sed -n 's/.*https=\([^ ]*\).*/\1/p' <<<"$READY")
SIP=$(sed -n 's/.*sip=\([^ ]*\).*/\1/p' <<<"$READY")
OPS=$(sed -n 's/.*ops=\([^ ]*\).*/\1/p' <<<"$READY")
echo "server: $READY (pid $SERVER); load average $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== dialproof-load --rate $RATE --mix create=1 --calls for ${DURATION}s"
"$LOAD" --target "https://$HTTPS" --cacert "$DIR/data/tls/cert.pem" --mix create=1 \
  --rate "$RATE" --connections "$CONNECTIONS" --threads 2 --duration "$DURATION" \
  --setup-local "$KEYS" --config "$DIR/dialproof.toml" --dialproof-bin "$BIN" \
  --calls --sip "$SIP" --drain-seconds 10 --json "$DIR/report.json"

if [ -n "$OPS" ]; then
  echo "== the server's view (GET /metrics on the ops listener)"
  curl -s "http://$OPS/metrics" | grep -E \
    '^dialproof_(storage_batches_total|webhook_attempts_total|webhook_queued|webhook_in_flight|webhook_delivery_latency_seconds_(sum|count))' || true
fi
echo "report: $DIR/report.json; server log: $DIR/stderr; load average $(cut -d' ' -f1-3 /proc/loadavg)"
