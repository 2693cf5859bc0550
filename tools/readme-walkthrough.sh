#!/usr/bin/env bash
# The README's first verification, run literally on a copy of this tree.
#
# Takes the shell blocks README.md marks with `<!-- walkthrough: ... -->`
# comments, in order, and runs them unchanged, as a person pasting them
# would: `background NAME, until TEXT` blocks in the background (their
# output to NAME.log) until TEXT shows in that output, every `run` block
# in one shell after them (variables carry over). Then it checks what they
# printed: the create's `HTTP 201`, the simulator's `verification
# completed`, the receiver's signed `verification.completed` line, the GET's
# `"status":"completed"` with the caller, the cancel's `"status":"expired"`,
# the simulator's `nothing changed` for the cancelled number, then test
# mode's (a test key's create with `"livemode":false`, the simulated call's
# `completed` outcome and a second signed webhook), and that the service
# stops with status 0 on SIGTERM.
#
#   sudo bash tools/readme-walkthrough.sh
#   CARGO_TARGET_DIR=$(mktemp -d) bash tools/readme-walkthrough.sh   # cold build
#   KEEP=1 bash tools/readme-walkthrough.sh                          # keep the copy and logs
#
# Runs in a network namespace of its own with only loopback (root), so the
# README's fixed ports (8443, 8080, 5060, 9000) cannot meet another
# service's. That namespace has no network, so `cargo fetch` runs first,
# outside it, and cargo runs offline inside. The copy holds the tree's
# tracked and untracked-but-not-ignored files (no data/, no target/), in
# one fixed place ($TMPDIR/dialproof-readme-walkthrough, emptied first);
# cargo builds into CARGO_TARGET_DIR when set, else into the copy's own
# target/ (removed with the copy), so a warm directory times the commands
# and an empty one the first build too. Prints the time to the service's READY line (the build included) and
# the total.
set -euo pipefail

# Generous bounds: a cold release build on two busy cores takes a while.
READY_TIMEOUT_SECONDS="${READY_TIMEOUT_SECONDS:-3600}"
STEPS_TIMEOUT_SECONDS="${STEPS_TIMEOUT_SECONDS:-1800}"

die() { echo "readme-walkthrough: $*" >&2; exit 1; }

if [ "${1:-}" != "--inside" ]; then
  cd "$(dirname "$0")/.."
  [ "$(id -u)" = 0 ] || die "needs root (a network namespace of its own)"
  command -v curl >/dev/null || die "needs curl (the README's commands use it)"
  # One fixed place, emptied first: the copy keeps the files' times and
  # path, so a warm target directory rebuilds nothing.
  work="${TMPDIR:-/tmp}/dialproof-readme-walkthrough"
  rm -rf "$work"
  echo "== copying the tree to $work/repo"
  mkdir -p "$work/repo"
  git ls-files -z --cached --others --exclude-standard |
    xargs -0 tar -cf - --no-recursion 2>/dev/null | tar -xf - -C "$work/repo"
  echo "== cargo fetch (outside the namespace: it has no network)"
  (cd "$work/repo" && cargo fetch --quiet)
  status=0
  unshare --net sh -c 'ip link set lo up && exec bash "$0" --inside "$1"' \
    "$(pwd)/tools/readme-walkthrough.sh" "$work" || status=$?
  if [ "${KEEP:-}" = 1 ] || [ "$status" != 0 ]; then
    echo "== kept $work (repo/, *.log, steps.sh)"
  else
    rm -rf "$work"
  fi
  exit "$status"
fi

# Inside the namespace: $2 is the work directory.
work="$2"
cd "$work/repo"
export CARGO_NET_OFFLINE=true
start=$(date +%s)

# The marked blocks, in README order: "KIND<TAB>ARG<TAB>" lines, each
# followed by the block's lines and an end marker.
awk '
  /^<!-- walkthrough: / {
    spec = $0; sub(/^<!-- walkthrough: /, "", spec); sub(/ -->$/, "", spec)
    want = 1; next
  }
  want && /^```sh$/ { print "@@BLOCK " spec; inside = 1; want = 0; next }
  inside && /^```$/ { print "@@END"; inside = 0; next }
  inside { print }
' README.md > "$work/blocks.txt"
grep -q '^@@BLOCK run' "$work/blocks.txt" || die "no walkthrough blocks in README.md"

# Background blocks start now; run blocks go to one script.
: > "$work/steps.sh"
bg_pids=()
current=""
while IFS= read -r line; do
  case "$line" in
    "@@BLOCK "*)
      current="${line#@@BLOCK }"
      block="" ;;
    "@@END")
      case "$current" in
        run)
          printf '%s\n' "$block" >> "$work/steps.sh" ;;
        background*)
          # "background NAME, until TEXT"
          spec="${current#background }"
          name="${spec%%,*}"
          until="${spec#*until }"
          echo "== background block '$name' (until '$until'):"
          printf '   %s\n' "$block"
          set -m
          bash -c "$block" > "$work/$name.log" 2>&1 &
          pid=$!
          set +m
          bg_pids+=("$pid")
          waited=0
          until grep -q -- "$until" "$work/$name.log"; do
            kill -0 "$pid" 2>/dev/null || { cat "$work/$name.log" >&2; die "'$name' exited before '$until'"; }
            [ "$waited" -lt "$READY_TIMEOUT_SECONDS" ] || die "'$name': no '$until' within ${READY_TIMEOUT_SECONDS} s"
            sleep 1
            waited=$((waited + 1))
          done
          echo "== '$name' printed '$until' after $(( $(date +%s) - start )) s"
          ;;
        *) die "unknown walkthrough block kind: $current" ;;
      esac ;;
    *)
      block="${block:+$block$'\n'}$line" ;;
  esac
done < "$work/blocks.txt"

cleanup() {
  for pid in "${bg_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "== the README's run blocks, in one shell:"
sed 's/^/   /' "$work/steps.sh"
steps_start=$(date +%s)
steps_status=0
# In a process group of its own, so whatever it left running (the
# receiver, if a step failed before the README's `kill`) is stopped too.
set -m
# Plain bash, as a person's shell: a command that exits non-zero on
# purpose (the simulator's call that completes nothing) does not stop the
# rest; the checks below judge the outcome.
timeout "$STEPS_TIMEOUT_SECONDS" bash "$work/steps.sh" > "$work/steps.log" 2>&1 &
steps=$!
set +m
bg_pids+=("$steps")
wait "$steps" || steps_status=$?
echo "== their output:"
sed 's/^/   /' "$work/steps.log"
[ "$steps_status" = 0 ] || die "the README's commands failed (status $steps_status)"

failed=0
check() {
  if grep -Eq -- "$2" "$work/steps.log"; then
    echo "ok: $1"
  else
    echo "FAILED: $1 (no line matching: $2)"
    failed=1
  fi
}
check "the create answered 201" '^HTTP 201$'
check "the call completed the verification" '^verification completed; call rejected with 603 without being answered'
# The receiver runs in the background of the same shell, as the README has
# it, so its line can land right after a curl body that has no newline of
# its own yet (the webhook is often there before the `; echo`): its line is
# matched where it ends, not where it starts.
hook_line='verification\.completed ver_[0-9A-Za-z]{26} valid$'
check "the receiver got the signed webhook" "$hook_line"
check "the GET shows it completed, with the caller" '"status":"completed".*"caller_id_received":"\+79161234567"'
check "the cancel answered expired" '"status":"expired"'
check "the call to the cancelled number changed nothing" '^nothing changed: no verification is pending on \+'
check "test mode: the test key's create is not live" '"livemode":false'
check "test mode: the simulated call completed it" '"outcome":"completed".*"caller_id_received":"\+79161234567".*"caller_id_source":"simulated"'
webhooks=$(grep -Ec "$hook_line" "$work/steps.log" || true)
if [ "$webhooks" -ge 2 ]; then
  echo "ok: test mode: the receiver got the test verification's signed webhook too"
else
  echo "FAILED: test mode: $webhooks signed verification.completed webhooks, want 2 (live and test)"
  failed=1
fi

# The service from "Two commands" stops cleanly on SIGTERM.
serve="${bg_pids[0]}"
kill -TERM -- "-$serve"
serve_status=0
wait "$serve" || serve_status=$?
if [ "$serve_status" = 0 ]; then
  echo "ok: the service stopped with status 0 on SIGTERM"
else
  echo "FAILED: the service exited $serve_status on SIGTERM"
  failed=1
fi
bg_pids=("${bg_pids[@]:1}")

end=$(date +%s)
echo "== the README's commands took $(( end - steps_start )) s after READY; $(( end - start )) s in all"
[ "$failed" = 0 ] || die "the walkthrough did not do what the README says"
echo "== the README's first verification works as written"
