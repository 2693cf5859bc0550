# Sourced by the benchmark scripts (tools/read-ab.sh, tools/lone-create-ab.sh,
# tools/idempotency-bench.sh): one release server on loopback with a single
# always-up line, and reading their JSON reports. Not a script to run.
#
#   start_bench_server DIR BIN NUMBERS   # sets SERVER (pid) and HTTPS (addr)
#   stop_bench_server                    # SIGTERM, and waits for it
#   field FILE EXPR                      # EXPR on the JSON report r

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
