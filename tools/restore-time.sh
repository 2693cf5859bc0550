#!/usr/bin/env bash
# How long a standby's `litestream restore` takes for a large database:
# builds a Dialproof database with ROWS verifications (the service's schema,
# made by its own operator CLI; rows filled by Python's sqlite3 in one
# transaction), replicates it once to a directory with `litestream
# replicate` (waiting for the snapshot), then times `litestream restore`
# of that replica into a new file and checks the row count.
#
#   ROWS=1000000 bash tools/restore-time.sh
#
# Needs the virtualenv tools/test.sh creates (Litestream's binary) and a
# built `dialproof` (cargo build). Everything is under a temporary
# directory, removed at the end; nothing leaves the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS="${ROWS:-1000000}"
LITESTREAM="${DIALPROOF_PYENV:-$(pwd)/target/pyenv}/bin/litestream"
BIN="${CARGO_TARGET_DIR:-target}/debug/dialproof"
[ -x "$LITESTREAM" ] || { echo "no $LITESTREAM: run tools/test.sh once" >&2; exit 1; }
[ -x "$BIN" ] || cargo build -p dialproof --quiet
work="$(mktemp -d)"
trap 'kill "${ls_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/data"
printf '[server]\nhttps_listen = "127.0.0.1:0"\n\n[storage]\ndata_dir = "data"\n' > "$work/dialproof.toml"
"$BIN" --config "$work/dialproof.toml" company create --name bench >/dev/null
"$BIN" --config "$work/dialproof.toml" key create --company 1 --label bench >/dev/null
python3 - "$work/data/dialproof.db" "$ROWS" <<'PY'
import sqlite3, sys, time
db, rows = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
now = int(time.time() * 1000)
def gen():
    for n in range(rows):
        t = now - (rows - n) * 10
        yield ("ver_%026d" % n, "+79123456789", "+7495%07d" % (n % 10000),
               "https://example.com/hook", "order-%d" % n, "tariff A",
               t, t + 600000, t + 5000, "+79161234567")
c.executemany("""INSERT INTO verifications (id, company_id, api_key_id, phone, dial_number,
    pool, webhook_url, client_ref, info, ttl_seconds, status, created_at, expires_at,
    completed_at, caller_id, lease_generation)
    VALUES (?, 1, 1, ?, ?, 'domestic', ?, ?, ?, 600, 'completed', ?, ?, ?, ?, 1)""", gen())
c.commit()
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
PY
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
"$LITESTREAM" restore -o "$work/restored.db" "file://$work/replica" >/dev/null 2>&1
end=$(date +%s.%N)
count=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM verifications').fetchone()[0])" "$work/restored.db")
took=$(awk "BEGIN { printf \"%.2f\", $end - $start }")
echo "restore of $ROWS rows (database $size, replica $replica): $took s; restored rows: $count"
