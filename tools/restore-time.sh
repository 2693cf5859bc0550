#!/usr/bin/env bash
# How long a standby takes over with a large database: builds a Dialproof
# database with ROWS verifications (the service's schema, made by its own
# operator CLI; rows filled by Python's sqlite3 in one transaction; 1 in 10
# pending), replicates it once to a directory with `litestream replicate`
# (waiting for the snapshot), then times `litestream restore` of that
# replica into a new data directory, checks the row count, and times
# `dialproof serve --promoted` on it from spawn to its READY line.
#
#   ROWS=1000000 bash tools/restore-time.sh
#
# Needs the virtualenv tools/test.sh creates (Litestream's binary) and a
# built `dialproof` (cargo build; BIN=target/release/dialproof for a
# release build). Everything is under a temporary
# directory, removed at the end; nothing leaves the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${ROWS:-1000000}"
LITESTREAM="${DIALPROOF_PYENV:-$(pwd)/target/pyenv}/bin/litestream"
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/debug/dialproof}"
[ -x "$LITESTREAM" ] || { echo "no $LITESTREAM: run tools/test.sh once" >&2; exit 1; }
[ -x "$BIN" ] || cargo build -p dialproof --quiet
work="$(mktemp -d)"
trap 'kill "${ls_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/data"
cat > "$work/dialproof.toml" <<'TOML'
[server]
https_listen = "127.0.0.1:0"

[storage]
data_dir = "data"

[[lines]]
name = "lab"
mode = "always_up"
numbers = [ { range_start = "+74950000000", count = 20000, pool = "domestic" } ]
TOML
"$BIN" --config "$work/dialproof.toml" company create --name bench >/dev/null
"$BIN" --config "$work/dialproof.toml" key create --company 1 --label bench >/dev/null
died=$(python3 - "$work/data/dialproof.db" "$ROWS" <<'PY'
import sqlite3, sys, time
db, rows = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
now = int(time.time() * 1000)
def gen():
    for n in range(rows):
        t = now - (rows - n) * 10
        # The newest 1 in 10 are pending, each on a number of its own.
        pending = n >= rows - 10000 and n % 10 == 0
        yield ("ver_%026d" % n, "+79123456789", "+7495%07d" % (n % 10000),
               "https://example.com/hook", "order-%d" % n, "tariff A",
               "pending" if pending else "completed",
               t, t + 600000, None if pending else t + 5000,
               "" if pending else "+79161234567")
c.executemany("""INSERT INTO verifications (id, company_id, api_key_id, phone, dial_number,
    pool, webhook_url, client_ref, info, ttl_seconds, status, created_at, expires_at,
    completed_at, caller_id, lease_generation)
    VALUES (?, 1, 1, ?, ?, 'domestic', ?, ?, ?, 600, ?, ?, ?, ?, ?, 1)""", gen())
c.commit()
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
# The "old primary" stopped right after its newest row: the promoted start
# is told so (--lost-until), as an operator who knows would.
print(now // 1000 + 1)
PY
)
printf 'dbs:\n  - path: %s\n    replica:\n      type: file\n      path: %s\n' \
  "$work/data/dialproof.db" "$work/replica" > "$work/litestream.yml"
"$LITESTREAM" replicate -config "$work/litestream.yml" > "$work/replicate.log" 2>&1 &
ls_pid=$!
for _ in $(seq 1 600); do
  grep -q "snapshot complete" "$work/replicate.log" && break
  sleep 0.5
done
grep -q "snapshot complete" "$work/replicate.log" || { cat "$work/replicate.log"; exit 1; }
kill "$ls_pid"; wait "$ls_pid" 2>/dev/null || true
size=$(du -sh "$work/data/dialproof.db" | cut -f1)
replica=$(du -sh "$work/replica" | cut -f1)
start=$(date +%s.%N)
mkdir -p "$work/standby/data"
"$LITESTREAM" restore -o "$work/standby/data/dialproof.db" "file://$work/replica" >/dev/null 2>&1
end=$(date +%s.%N)
count=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM verifications').fetchone()[0])" "$work/standby/data/dialproof.db")
took=$(awk "BEGIN { printf \"%.2f\", $end - $start }")
echo "restore of $ROWS rows (database $size, replica $replica): $took s; restored rows: $count"
cp "$work/dialproof.toml" "$work/standby/dialproof.toml"
start=$(date +%s.%N)
"$BIN" --config "$work/standby/dialproof.toml" serve --promoted --lost-until "$died" > "$work/standby.out" 2> "$work/standby.log" &
ls_pid=$!
for _ in $(seq 1 1200); do
  grep -q '^READY' "$work/standby.out" && break
  sleep 0.05
done
end=$(date +%s.%N)
grep -q '^READY' "$work/standby.out" || { cat "$work/standby.log"; exit 1; }
took=$(awk "BEGIN { printf \"%.2f\", $end - $start }")
echo "promoted start to READY: $took s; $(grep -o 'held=[0-9]*' "$work/standby.log")"
