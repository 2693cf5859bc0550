#!/usr/bin/env bash
# Builds the Debian package of the dialproof binary (README in this folder):
#
#   bash tools/deb/build.sh [--debug]
#
# Release profile by default (what an operator installs); --debug packages
# the dev-profile binary the test suite has already built, so CI does not
# compile the workspace a second time. The package is a dpkg-deb over a
# staged tree: /usr/bin/dialproof, the units (dialproof.service for one
# node; dialproof-ha.service, from tools/deploy/, for a node of an
# automatic-failover cluster: enable one of them), the conffile
# /etc/dialproof/dialproof.toml, the maintainer scripts (postinst makes the
# user and /var/lib/dialproof, which the package does not own, so neither
# removal nor purge touches the data). Prints the .deb's
# path on its last line. Needs cargo and dpkg-deb; downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."

profile=release
case "${1:-}" in
  "") ;;
  --debug) profile=debug ;;
  *) echo "usage: $0 [--debug]" >&2; exit 2 ;;
esac

target="${CARGO_TARGET_DIR:-target}"
if [ "$profile" = release ]; then
  cargo build --release --quiet --bin dialproof
else
  # The same command as tools/test.sh's build (the binary built with the
  # test targets' features), so after the suite's build this is a no-op.
  cargo build --workspace --all-targets --quiet
fi
binary="$target/$profile/dialproof"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
arch=$(dpkg --print-architecture)
stage="$target/deb/stage-$profile"
rm -rf "$stage"
install -d "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" \
  "$stage/etc/dialproof" "$stage/usr/share/doc/dialproof"
install -m 0755 "$binary" "$stage/usr/bin/dialproof"
install -m 0644 tools/deb/dialproof.service "$stage/lib/systemd/system/dialproof.service"
install -m 0644 tools/deploy/dialproof-ha.service "$stage/lib/systemd/system/dialproof-ha.service"
install -m 0640 tools/deb/dialproof.toml "$stage/etc/dialproof/dialproof.toml"
install -m 0644 README.md "$stage/usr/share/doc/dialproof/README.md"
install -m 0644 tools/deb/README.md "$stage/usr/share/doc/dialproof/README.Debian"
# The operator's guide (commands, metrics, alerts' runbooks, failover).
install -m 0644 tools/deploy/README.md "$stage/usr/share/doc/dialproof/operations.md"
install -m 0644 tools/deploy/dialproof-alerts.yml "$stage/usr/share/doc/dialproof/dialproof-alerts.yml"
for script in postinst prerm postrm; do
  install -m 0755 "tools/deb/$script" "$stage/DEBIAN/$script"
done
echo /etc/dialproof/dialproof.toml > "$stage/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: dialproof
Version: $version
Architecture: $arch
Maintainer: Dialproof operators <root@localhost>
Installed-Size: $size
Depends: libc6, adduser, util-linux
Suggests: etcd-server
Section: net
Priority: optional
Description: phone-ownership verification by inbound call
 A client creates a verification for a phone number; the service leases
 one of its inbound numbers, the user calls it, the service records the
 Caller-ID over SIP, rejects the call and sends a signed webhook.
 dialproof.service runs one node; dialproof-ha.service runs a node of an
 automatic-failover cluster (etcd elects the primary; Litestream, not
 packaged in Debian, replicates the database).
 This package holds the $profile-profile build of the dialproof binary.
CONTROL

out="$target/deb/dialproof_${version}_${arch}.deb"
# The dev-profile binary is large and only for tests: fast compression.
if [ "$profile" = release ]; then compress=(-Zxz); else compress=(-Zgzip -z1); fi
dpkg-deb --root-owner-group "${compress[@]}" --build "$stage" "$out" >/dev/null
echo "$out"
