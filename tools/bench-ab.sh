#!/usr/bin/env bash
# The criterion benchmarks on two builds: A is an older commit (BASE, by
# default the last commit before src/ was restructured for issue 11), B
# this tree. Each bench runs A then B, then B then A, ROUNDS rounds in all
# (the machine's other load varies, and grows as a series runs), and the
# script prints every benchmark's median time per run and B/A of the
# medians of the rounds.
#
#   bash tools/bench-ab.sh
#   BENCHES="create_path sip_invite" ROUNDS=2 bash tools/bench-ab.sh
#
# BASE is checked out in a git worktree under target/ab-base (its own
# target dir); BASE_TREE/BASE_TARGET name an existing checkout of BASE and
# its target dir instead, B_TARGET this tree's target dir (default target/). Benches that need the release binary and sipp
# (webhook_latency) are left to tools/sip-ab.sh's end-to-end comparison.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${BASE:-113be58}
ROUNDS=${ROUNDS:-2}
BENCHES=${BENCHES:-create_path sip_invite lease_table}
# Short runs: a comparison in the same session, not a figure for the table.
CRITERION=(--warm-up-time 1 --measurement-time 3)

# BASE_TREE / BASE_TARGET: an existing checkout of BASE and its target dir.
WT=${BASE_TREE:-$PWD/target/ab-base/src}
if [ ! -d "$WT" ]; then git worktree add -f --detach "$WT" "$BASE" >/dev/null; fi
git -C "$WT" checkout -q --detach "$BASE"
OUT=$(mktemp -d /tmp/dialproof-bench-ab.XXXXXX)

A_TARGET=${BASE_TARGET:-$PWD/target/ab-base/target}
B_TARGET=${B_TARGET:-$PWD/target}

run() { # side bench round
  local dir=$PWD target=$B_TARGET
  if [ "$1" = A ]; then dir=$WT; target=$A_TARGET; fi
  # Only this run's estimates are left to read.
  rm -rf "$target/criterion"
  (cd "$dir" && CARGO_TARGET_DIR=$target cargo bench -q --bench "$2" -- "${CRITERION[@]}" \
    > "$OUT/$1-$2-$3.txt" 2>&1)
  # criterion's estimates of this run, per benchmark id: the median in ns.
  python3 - "$target/criterion" "$OUT/$1-$2-$3.json" <<'EOF'
import json, os, sys
root, out = sys.argv[1], sys.argv[2]
found = {}
for dirpath, _, files in os.walk(root):
    if "estimates.json" in files and dirpath.endswith("/new"):
        bench = os.path.relpath(os.path.dirname(dirpath), root)
        with open(os.path.join(dirpath, "estimates.json")) as f:
            found[bench] = json.load(f)["median"]["point_estimate"]
json.dump(found, open(out, "w"))
EOF
}

for bench in $BENCHES; do
  echo "== $bench (building both)"
  (cd "$WT" && CARGO_TARGET_DIR=$A_TARGET cargo bench -q --bench "$bench" --no-run)
  CARGO_TARGET_DIR=$B_TARGET cargo bench -q --bench "$bench" --no-run
  # A B, then B A: a series loads the machine more as it goes.
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then
      run A "$bench" "$round"; run B "$bench" "$round"
    else
      run B "$bench" "$round"; run A "$bench" "$round"
    fi
  done
done

python3 - "$OUT" "$ROUNDS" $BENCHES <<'EOF'
import json, statistics, sys
out, rounds, benches = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def fmt(ns):
    return f"{ns/1e6:.2f} ms" if ns >= 1e6 else f"{ns/1e3:.2f} us" if ns >= 1e3 else f"{ns:.1f} ns"
print(f"{'benchmark':60} {'A median':>12} {'B median':>12} {'B/A':>6}")
for bench in benches:
    runs = {s: [json.load(open(f"{out}/{s}-{bench}-{r}.json")) for r in range(1, rounds + 1)] for s in "AB"}
    ids = sorted(set(runs["A"][0]) & set(runs["B"][0]))
    for i in ids:
        a = statistics.median(r[i] for r in runs["A"] if i in r)
        b = statistics.median(r[i] for r in runs["B"] if i in r)
        print(f"{i[:60]:60} {fmt(a):>12} {fmt(b):>12} {b/a:6.2f}")
print(f"outputs: {out}")
EOF
