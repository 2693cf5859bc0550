#!/usr/bin/env bash
# Kill-to-serving of automatic failover (README, "Automatic failover"):
# three etcd members and two `dialproof ha` nodes on loopback, replicating
# to one directory replica. RUNS times: SIGKILL of the primary's whole node
# (supervisor, service, Litestream: as when its machine dies), then the time
# until the other node answers a create with 201 over HTTPS; the killed
# node is started again and rejoins as the standby. Prints every run and
# the distribution.
#
#   sudo bash tools/ha-failover.sh            # RUNS=10 TTL=5
#
# Runs in a network namespace of its own (needs root, like the tests), so
# its fixed loopback ports clash with nothing. Needs etcd (Debian package
# etcd-server), setpriv (util-linux), curl, the virtualenv tools/test.sh
# creates (Litestream) and a built `dialproof` (BIN=..., default
# target/debug/dialproof). Everything lives in a temporary directory,
# removed at the end; nothing leaves the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${HA_FAILOVER_IN_NS:-}" ]; then
  exec unshare --net env HA_FAILOVER_IN_NS=1 bash "$0" "$@"
fi
ip link set lo up
RUNS="${RUNS:-10}"
TTL="${TTL:-5}"
LITESTREAM="${DIALPROOF_PYENV:-$(pwd)/target/pyenv}/bin/litestream"
BIN="$(realpath "${BIN:-${CARGO_TARGET_DIR:-target}/debug/dialproof}")"
[ -x "$LITESTREAM" ] || { echo "no $LITESTREAM: run tools/test.sh once" >&2; exit 1; }
[ -x "$BIN" ] || { echo "no $BIN: cargo build -p dialproof" >&2; exit 1; }
command -v etcd >/dev/null || { echo "no etcd: apt-get install etcd-server" >&2; exit 1; }
work="$(mktemp -d)"
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$work"' EXIT

cluster="m1=http://127.0.0.1:2380,m2=http://127.0.0.1:2480,m3=http://127.0.0.1:2580"
for i in 1 2 3; do
  c=$((2279 + i * 100)); p=$((2280 + i * 100))
  setsid etcd --name "m$i" --data-dir "$work/m$i" \
    --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
    --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
    --initial-cluster "$cluster" --heartbeat-interval 100 --election-timeout 1000 \
    > "$work/m$i.log" 2>&1 &
  pids+=($!)
done

# node NAME PORT_DIGIT: its directory, configuration and Litestream's.
node_config() {
  local n=$1 d=$2 dir="$work/$1"
  mkdir -p "$dir"
  printf 'dbs:\n  - path: %s\n    monitor-interval: 1s\n    replica:\n      type: file\n      path: %s\n      sync-interval: 1s\n' \
    "$dir/data/dialproof.db" "$work/replica" > "$dir/litestream.yml"
  cat > "$dir/dialproof.toml" <<TOML
[server]
https_listen = "127.0.0.1:${d}8443"
ops_listen = "127.0.0.1:${d}9090"
workers = 1

[storage]
data_dir = "data"
replication = "litestream"

[sip]
listen = "127.0.0.1:${d}5060"

[[lines]]
name = "lab"
mode = "always_up"
provider_addresses = ["127.0.0.1"]
numbers = [ { range_start = "+74950000000", count = 2000, pool = "domestic" } ]

[ha]
endpoints = ["http://127.0.0.1:2379", "http://127.0.0.1:2479", "http://127.0.0.1:2579"]
cluster = "bench"
node = "$n"
lease_ttl_seconds = $TTL
litestream = "$LITESTREAM"
litestream_config = "litestream.yml"
TOML
}
declare -A node_pid digit=([a]=1 [b]=2)
start_node() {
  setsid "$BIN" --config "$work/$1/dialproof.toml" ha >> "$work/$1/out.log" 2>> "$work/$1/err.log" &
  node_pid[$1]=$!
  pids+=($!)
}
ready() { curl -s -m 1 "http://127.0.0.1:${digit[$1]}9090/readyz" 2>/dev/null | grep -q '^ready'; }
create() {
  curl -sk -m 2 -o "$work/created.json" -w '%{http_code}' -X POST "https://127.0.0.1:${digit[$1]}8443/api/v1/verifications/" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"phone": "+79161234567", "webhook_url": "http://127.0.0.1:9/hook"}' 2>/dev/null || true
}
serving() { [ "$(create "$1")" = 201 ]; }
wait_for() { # seconds, command...
  local until=$(( $(date +%s) + $1 )); shift
  until "$@"; do [ "$(date +%s)" -lt "$until" ] || return 1; sleep 0.05; done
}

node_config a 1; node_config b 2
sleep 2
start_node a
wait_for 30 ready a || { tail "$work/a/err.log"; exit 1; }
"$BIN" --config "$work/a/dialproof.toml" company create --name bench >/dev/null
token=$("$BIN" --config "$work/a/dialproof.toml" --json key create --company 1 --label bench |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
prefix=$(echo "$token" | cut -d_ -f3)
# Webhooks to a closed loopback port: the deliveries fail, which the
# measure does not look at.
"$BIN" --config "$work/a/dialproof.toml" company dev-urls 1 "http://127.0.0.1:9/" >/dev/null
"$BIN" --config "$work/a/dialproof.toml" key set-limit "$prefix" 100000 >/dev/null
start_node b
primary=a standby=b
times=()
promote=()
ids=()
for run in $(seq 1 "$RUNS"); do
  # The standby is up and the replica has the primary's newest commits.
  sleep 3
  code=$(create $primary)
  [ "$code" = 201 ] || { echo "run $run: the primary $primary answers a create with $code" >&2; exit 1; }
  ids+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verification_id"])' "$work/created.json")")
  sleep 2
  t0=$(date +%s.%N)
  kill -KILL -- "-${node_pid[$primary]}"
  wait_for 30 serving "$standby" || { echo "run $run: no takeover in 30 s" >&2; tail -20 "$work/$standby/err.log"; exit 1; }
  t1=$(date +%s.%N)
  ms=$(python3 -c "print(round(($t1 - $t0) * 1000))")
  times+=("$ms")
  took=$(grep 'ha: PROMOTED' "$work/$standby/err.log" | tail -1 | sed 's/.*took_ms=\([0-9]*\).*/\1/')
  promote+=("$took")
  echo "run $run: $primary killed, $standby serving creates after $ms ms (its promotion, win to serving: $took ms)"
  start_node "$primary"
  tmp=$primary; primary=$standby; standby=$tmp
done
echo "promotions (restore and promoted start, win to serving): ${promote[*]} ms"
# Each promotion restored what the one before replicated to the same
# path: every run's create, older than the replication interval at its
# kill, must be on the last primary.
missing=0
for id in "${ids[@]}"; do
  code=$(curl -sk -m 2 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" \
    "https://127.0.0.1:${digit[$primary]}8443/api/v1/verifications/$id/")
  [ "$code" = 200 ] || { echo "$id (created before a kill) is missing on the last primary: $code"; missing=$((missing + 1)); }
done
echo "creates of every run found on the last primary after $RUNS failovers: $(( ${#ids[@]} - missing ))/${#ids[@]}"
printf '%s\n' "${times[@]}" | python3 -c '
import sys, statistics
v = sorted(int(x) for x in sys.stdin)
q = lambda p: v[min(len(v) - 1, int(round(p * (len(v) - 1))))]
print(f"kill-to-serving over {len(v)} runs (lease TTL '"$TTL"' s): min {v[0]} ms, "
      f"median {statistics.median(v):.0f} ms, p90 {q(0.9)} ms, max {v[-1]} ms")'
