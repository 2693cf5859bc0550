#!/usr/bin/env bash
# tools/sip-bench.sh on two builds of the service, alternating A B B A (the
# machine's other load varies, and grows as a series runs): A is an older
# commit (BASE, by default the last commit before src/ was restructured for
# issue 11), B this tree. Same sipp, same receiver, same rates; prints one
# line per run: rates, latency, and the server's CPU per leased completion
# with its webhook (the steadier figure on a shared machine).
#
#   bash tools/sip-ab.sh
#   BASE=<commit> ROUNDS=3 RATE=10000 CALLS=50000 LEASED=10000 bash tools/sip-ab.sh
#   BASE_BIN=path/to/old/dialproof bash tools/sip-ab.sh   # skip building BASE
#
# BASE is built in a git worktree under target/ab-base (its own target dir,
# about 3 GB). Everything stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${BASE:-113be58}
ROUNDS=${ROUNDS:-2}
export RATE=${RATE:-10000} CALLS=${CALLS:-50000} LEASED=${LEASED:-10000}

cargo build --release -q --workspace --bins
BASE_BIN_GIVEN=${BASE_BIN:-}
if [ -z "${BASE_BIN:-}" ]; then
  WT=$PWD/target/ab-base/src
  if [ ! -d "$WT" ]; then git worktree add -f --detach "$WT" "$BASE" >/dev/null; fi
  git -C "$WT" checkout -q --detach "$BASE"
  CARGO_TARGET_DIR=$PWD/target/ab-base/target cargo build --release -q -p dialproof \
    --manifest-path "$WT/Cargo.toml"
  BASE_BIN=$PWD/target/ab-base/target/release/dialproof
fi
HEAD_BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/dialproof
OUT=$(mktemp -d /tmp/dialproof-sip-ab.XXXXXX)

# From sip-bench's output: "<rate> <p50> <p99>" of the unleased and the
# leased run (rate from sipp's cps, latencies from its rtd histogram), and
# the server's CPU per completion, and calls with their webhooks a second
# (first leased call to last webhook); also appends "SIDE leased-rate cpu
# writer end-to-end" to $OUT/figures for the medians at the end.
summary() {
  python3 - "$1" "$2" "$OUT/figures" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
rates = re.findall(r"Call Rate\s*\|.*\|\s*([0-9.]+) cps", text)
lat = re.findall(r"p50 (\d+) ms, p99 (\d+) ms", text)
parts = []
for name, r, (p50, p99) in zip(["unleased", "leased"], rates, lat):
    parts.append(f"{name} {float(r):7.0f}/s p50 {p50:>3} ms p99 {p99:>3} ms")
cpu = re.search(r"([0-9.]+) us per completion", text)
hooks = re.search(r"webhooks received: (\d+)", text)
writer = re.search(r"by thread \(us per completion\):.*?db-writer ([0-9.]+)", text)
e2e = re.search(r"calls with their webhooks: (\d+) a second", text)
if cpu and hooks:
    parts.append(f"CPU {cpu.group(1)} us/completion"
                 + (f" (writer {writer.group(1)})" if writer else "")
                 + f", {hooks.group(1)} webhooks"
                 + (f", with them {e2e.group(1)}/s" if e2e else ""))
print(" | ".join(parts))
# An older build may not print the CPU by thread: its writer figure is nan.
if len(rates) >= 2 and cpu and e2e:
    with open(sys.argv[3], "a") as figures:
        print(sys.argv[2], rates[1], cpu.group(1), writer.group(1) if writer else "nan",
              e2e.group(1), file=figures)
EOF
}

echo "A = ${BASE_BIN_GIVEN:-$BASE ($BASE_BIN)}, B = this tree; RATE=$RATE CALLS=$CALLS LEASED=$LEASED"
for round in $(seq "$ROUNDS"); do
  # A B, then B A (and so on): a series loads the machine more as it goes,
  # and with A always first the same build on both sides read 1.06 for B's
  # CPU per completion (benches/README.md, "Number health: the run in
  # memory").
  sides="A B"; [ $((round % 2)) = 0 ] && sides="B A"
  for side in $sides; do
    bin=$BASE_BIN; [ "$side" = B ] && bin=$HEAD_BIN
    DIALPROOF_BIN=$bin bash tools/sip-bench.sh > "$OUT/$side$round.txt" 2>&1
    echo "round $round $side: $(summary "$OUT/$side$round.txt" "$side")  (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done
# Medians over the rounds, per side: the leased rate, the calls with their
# webhooks a second, the server's CPU per completion with its webhook, and
# the storage writer's share of it.
[ -s "$OUT/figures" ] && python3 - "$OUT/figures" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def med(side, i):
    values = [float(r[i]) for r in rows if r[0] == side and r[i] != "nan"]
    return statistics.median(values) if values else None
if {r[0] for r in rows} == {"A", "B"}:
    for i, what in ((1, "leased completions/s"), (4, "calls with their webhooks/s"),
                    (2, "server CPU us per completion"),
                    (3, "storage writer CPU us per completion")):
        a, b = med("A", i), med("B", i)
        if a is None or b is None:
            print(f"median {what}: not printed by both builds")
        else:
            print(f"median {what}: A {a:.1f}, B {b:.1f}, B/A {b / a:.2f}")
EOF
echo "outputs: $OUT"
