# Sourced by the benchmark scripts (tools/read-ab.sh, tools/lone-create-ab.sh,
# tools/idempotency-bench.sh, tools/serving-memory.sh; tools/sip-bench.sh
# for thread_ticks): one release server on loopback with a single
# always-up line, reading their JSON reports, and a server's CPU by thread.
# Not a script to run.
#
#   start_bench_server DIR BIN NUMBERS   # sets SERVER (pid) and HTTPS (addr)
#   stop_bench_server                    # SIGTERM, and waits for it
#   field FILE EXPR                      # EXPR on the JSON report r
#   thread_ticks PID                     # "name ticks" per thread name
#   thread_us_per BEFORE AFTER COUNT     # us per unit of work, by thread

# Writes DIR/dialproof.toml (data in DIR/data, NUMBERS domestic numbers from
# +74950000000, 2 workers, ephemeral ports), starts BIN serve on it and
# waits (30 s at most) for its READY line.
start_bench_server() {
  local dir=$1 bin=$2 numbers=$3
  mkdir -p "$dir"
  cat > "$dir/dialproof.toml" <<CONFIG
[server]
https_listen = "127.0.0.1:0"
workers = 2
[storage]
data_dir = "$dir/data"
[[lines]]
name = "bench"
mode = "always_up"
numbers = [ { range_start = "+74950000000", count = $numbers, pool = "domestic" } ]
CONFIG
  "$bin" --config "$dir/dialproof.toml" serve > "$dir/stdout" 2> "$dir/stderr" &
  SERVER=$!
  for _ in $(seq 300); do grep -q READY "$dir/stdout" && break; sleep 0.1; done
  grep -q READY "$dir/stdout" || { echo "no READY from $bin (see $dir/stderr)" >&2; return 1; }
  HTTPS=$(sed -n 's/.*https=\([^ ]*\).*/\1/p' "$dir/stdout")
}

stop_bench_server() {
  kill -TERM "$SERVER"
  wait "$SERVER" || true
  SERVER=""
}

field() { # json-file python-expression-on-r
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"
}

# CPU ticks (user + system) by thread name of process PID, summed over the
# threads of one name: "name ticks" lines. The storage writer is db-writer,
# the commit consumer commits, the HTTP and SIP workers carry the binary's
# name.
thread_ticks() {
  for t in /proc/"$1"/task/*; do
    # comm may hold spaces, so take the fields after the ")" of stat.
    printf '%s %s\n' "$(tr ' ' _ < "$t/comm")" "$(sed 's/.*) //' "$t/stat" | awk '{ print $12 + $13 }')"
  done 2>/dev/null | awk '{ s[$1] += $2 } END { for (k in s) print k, s[k] }'
}

# thread_us_per BEFORE AFTER COUNT: from two thread_ticks outputs, each
# thread name's CPU per unit of work in microseconds, the busiest first.
thread_us_per() {
  awk -v hz="$(getconf CLK_TCK)" -v n="$3" '
    NR == FNR { before[$1] = $2; next }
    { d = $2 - before[$1]; if (d > 0) printf "%s %.1f\n", $1, 1e6 * d / hz / n }' \
    <(echo "$1") <(echo "$2") | sort -k2 -g -r | head -9 \
    | awk '{ line = line sep $1 " " $2; sep = ", " } END { print line }'
}
