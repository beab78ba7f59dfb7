# Shared by bench/serve_bench.sh and bench/serve_kill_bench.sh (sourced, not run): the
# environment checks, a scratch folder removed on exit with the server in it stopped, the
# wrk script that POSTs a body file, and starting `bulkhead serve` on 127.0.0.1.
#   serve_lib_init NAME      checks wrk, the program and the data; sets bin, shared, work
#   serve_start REPO [ARGS]  starts the server on a free port; sets server_pid and url
# The wrk script ($work/post.lua) reads BODY (a file) and HDR (the binary extension's JSON
# length; empty for a JSON body) and prints "RESULT requests seconds p50_ms p99_ms non2xx timeouts".

serve_lib_init() {
  local me=$1
  command -v wrk >/dev/null || { echo "$me: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
  bin=${BULKHEAD_BIN:-build/bulkhead}
  shared=${BULKHEAD_SHARED:-$(cd .. && pwd)/shared}
  [ -x "$bin" ] || { echo "$me: $bin is not built" >&2; exit 1; }
  [ -d "$shared/models" ] || { echo "$me: the shared test data '$shared' is missing" >&2; exit 1; }
  work=$(mktemp -d)
  server_pid=
  trap serve_lib_cleanup EXIT
  cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
local f = assert(io.open(os.getenv("BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
local h = os.getenv("HDR")
if h ~= nil and h ~= "" then
  wrk.headers["Content-Type"] = "application/octet-stream"
  wrk.headers["Inference-Header-Content-Length"] = h
else
  wrk.headers["Content-Type"] = "application/json"
end
function done(summary, latency, requests)
  io.write(string.format("RESULT %d %.3f %.3f %.3f %d %d\n", summary.requests, summary.duration / 1e6,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.errors.status, summary.errors.timeout))
end
LUA
}

serve_lib_cleanup() {
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}

serve_start() {
  local repo=$1; shift
  "$bin" serve --model-repository "$repo" --http-port 0 "$@" >"$work/serve.out" 2>"$work/serve.log" &
  server_pid=$!
  for _ in $(seq 600); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
  url=$(awk '/listening/ {print $NF}' "$work/serve.out")
  [ -n "$url" ] || { echo "the server did not start:" >&2; cat "$work/serve.log" >&2; exit 1; }
}
