#!/usr/bin/env bash
# Runs each cargo-fuzz target of engine/fuzz (sip_parse, http_request,
# create_body) for FUZZ_SECONDS seconds (default 60) when a nightly toolchain
# and cargo-fuzz are installed; otherwise says why and exits 0. The default
# test run covers the same functions without nightly, with seeded mutations
# of the same corpora (engine/tests/it/sip.rs,
# engine/tests/it/edges.rs).
#
#   bash tools/fuzz.sh                      # 60 s per target
#   FUZZ_SECONDS=3600 bash tools/fuzz.sh    # longer
#
# A crash is saved under engine/fuzz/artifacts/<target>/ and fails the run.
set -euo pipefail
cd "$(dirname "$0")/../engine/fuzz"
seconds="${FUZZ_SECONDS:-60}"
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "== fuzz: skipped (no nightly toolchain)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "== fuzz: skipped (cargo-fuzz is not installed: cargo install cargo-fuzz)"
  exit 0
fi
for target in sip_parse http_request create_body; do
  echo "== fuzz: $target for ${seconds} s"
  # The committed seeds are copied to a scratch corpus, so what the fuzzer
  # adds does not land in the repository.
  work="$(mktemp -d)"
  cp "corpus/$target/"* "$work/"
  status=0
  cargo +nightly fuzz run "$target" "$work" -- -max_total_time="$seconds" || status=$?
  rm -rf "$work"
  if [ "$status" -ne 0 ]; then
    echo "== fuzz: $target failed (see engine/fuzz/artifacts/$target/)"
    exit "$status"
  fi
done
