#!/usr/bin/env bash
# The package as an operator meets it (tools/deb/README.md; run by
# tools/test.sh as root, in a network namespace with only loopback):
# build it, dpkg -i, systemd-analyze verify the installed units (and that
# the failover unit conflicts with the single-node one), `dialproof check`
# on the packaged config as the packaged user (and `dialproof ha` refused
# on it, naming the missing [ha] section), start the packaged
# binary as that user with the unit's one capability, create a
# verification over HTTPS and complete it with dialproof-sim, stop it,
# then dpkg -r (config and data kept) and dpkg --purge (config removed).
#
# It refuses to run where a dialproof package or /var/lib/dialproof is
# already there (it would remove an operator's install), and removes what
# it installed on exit, pass or fail.
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "test-package: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i)"
if dpkg-query -W -f '${Status}' dialproof 2>/dev/null | grep -q installed ||
   [ -e /var/lib/dialproof ] || [ -e /etc/dialproof ]; then
  fail "a dialproof install is present (package, /etc/dialproof or /var/lib/dialproof): \
this test installs and purges its own; remove it first"
fi

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  dpkg --purge dialproof >/dev/null 2>&1 || true
  rm -rf /var/lib/dialproof /etc/dialproof "$work"
}
trap cleanup EXIT

target="${CARGO_TARGET_DIR:-target}"
# Also builds dialproof-sim (the workspace, as tools/test.sh does).
deb=$(bash tools/deb/build.sh --debug | tail -n1)
sim="$target/debug/dialproof-sim"
echo "== dpkg -i $deb"
dpkg -i "$deb" >/dev/null

getent passwd dialproof >/dev/null || fail "no dialproof user"
[ "$(stat -c %U:%a /var/lib/dialproof)" = dialproof:750 ] || fail "/var/lib/dialproof owner or mode"
[ "$(stat -c %U:%G:%a /etc/dialproof/dialproof.toml)" = root:dialproof:640 ] || fail "config owner or mode"
dpkg-query -W -f '${Conffiles}' dialproof | grep -q '/etc/dialproof/dialproof.toml' ||
  fail "the config is not a conffile"
for doc in README.md operations.md dialproof-alerts.yml; do
  [ -s "/usr/share/doc/dialproof/$doc" ] || fail "/usr/share/doc/dialproof/$doc not installed"
done

echo "== systemd-analyze verify (both units)"
for unit in dialproof.service dialproof-ha.service; do
  verify=$(systemd-analyze verify "/lib/systemd/system/$unit" 2>&1) ||
    fail "systemd-analyze verify $unit: $verify"
  [ -z "$verify" ] || fail "systemd-analyze verify $unit warns: $verify"
done
grep -qx 'Conflicts=dialproof.service' /lib/systemd/system/dialproof-ha.service ||
  fail "dialproof-ha.service may run beside dialproof.service (design choice: one unit per node)"

config=/etc/dialproof/dialproof.toml
echo "== dialproof check, as the dialproof user"
runuser -u dialproof -- dialproof --config "$config" check > "$work/check.out" ||
  fail "check refused the packaged config: $(cat "$work/check.out")"
grep -qx "configuration OK" "$work/check.out" || fail "no 'configuration OK'"

echo "== dialproof ha on the single-node config says what it lacks"
if runuser -u dialproof -- dialproof --config "$config" ha > "$work/ha.out" 2>&1; then
  fail "dialproof ha ran without an [ha] section"
fi
grep -q 'needs an \[ha\] section' "$work/ha.out" || fail "dialproof ha: $(cat "$work/ha.out")"

echo "== serve, as the dialproof user with CAP_NET_BIND_SERVICE only"
# What the unit gives: the user, no new privileges, one capability.
DIALPROOF_LOG=info,may=warn NO_COLOR=1 setpriv --reuid=dialproof --regid=dialproof \
  --init-groups --no-new-privs --bounding-set=-all,+net_bind_service \
  --inh-caps=-all,+net_bind_service --ambient-caps=-all,+net_bind_service \
  dialproof --config "$config" serve > "$work/stdout" 2> "$work/stderr" &
server=$!
for _ in $(seq 1 200); do
  grep -q '^READY ' "$work/stdout" && break
  kill -0 "$server" 2>/dev/null || fail "serve exited: $(cat "$work/stderr")"
  sleep 0.1
done
grep -q '^READY https=0.0.0.0:443 http=0.0.0.0:80 sip=127.0.0.1:5060 ops=127.0.0.1:9100$' \
  "$work/stdout" || fail "READY line: $(cat "$work/stdout") $(cat "$work/stderr")"
[ "$(stat -c %U /var/lib/dialproof/dialproof.db)" = dialproof ] || fail "database owner"

op() { runuser -u dialproof -- dialproof --config "$config" --json "$@"; }
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p"; }
company=$(op company create --name Packaged | field id)
op company dev-url add "$company" http://127.0.0.1:9000 >/dev/null
token=$(op key create --company "$company" --label package-test | field token)
[ -n "$token" ] || fail "no API key"

echo "== create over HTTPS, complete with dialproof-sim"
curl_() { curl -sS --max-time 10 --cacert /var/lib/dialproof/tls/cert.pem \
  -H "Authorization: Bearer $token" "$@"; }
created=$(curl_ https://localhost/api/v1/verifications/ -H 'Content-Type: application/json' \
  -d '{"phone":"+79123456789","webhook_url":"http://127.0.0.1:9000/hook","ttl_seconds":120}' \
  -w '\n%{http_code}')
[ "$(echo "$created" | tail -n1)" = 201 ] || fail "create: $created"
id=$(echo "$created" | field verification_id)
dial=$(echo "$created" | field dial_number)
"$sim" call --to "$dial" --from +79161234567 > "$work/sim.out" ||
  fail "dialproof-sim: $(cat "$work/sim.out")"
read_back=$(curl_ "https://localhost/api/v1/verifications/$id/")
[ "$(echo "$read_back" | field status)" = completed ] || fail "after the call: $read_back"
[ "$(echo "$read_back" | field caller_id_received)" = +79161234567 ] || fail "caller: $read_back"

echo "== stop (SIGTERM)"
kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
[ "$status" = 0 ] || fail "serve exited $status on SIGTERM: $(tail -n5 "$work/stderr")"

echo "== dpkg -r keeps the config and the data"
dpkg -r dialproof >/dev/null
[ ! -e /usr/bin/dialproof ] || fail "binary left after dpkg -r"
[ ! -e /lib/systemd/system/dialproof.service ] || fail "unit left after dpkg -r"
[ ! -e /lib/systemd/system/dialproof-ha.service ] || fail "ha unit left after dpkg -r"
[ -f /etc/dialproof/dialproof.toml ] || fail "config removed by dpkg -r"
[ -f /var/lib/dialproof/dialproof.db ] || fail "data removed by dpkg -r"

echo "== dpkg --purge removes the config and keeps the data"
dpkg --purge dialproof >/dev/null
[ ! -e /etc/dialproof ] || fail "/etc/dialproof left after --purge"
[ -f /var/lib/dialproof/dialproof.db ] || fail "data removed by --purge"
echo "test-package: passed"
