#!/usr/bin/env bash
# serve_kill_bench: does a worker that keeps crashing reach another model's latency?
#
#   bench/serve_kill_bench.sh [--duration S] [--kills N] [--concurrency C]
#
# One `bulkhead serve` on 127.0.0.1 with rec (in-process, 1 thread) and Silero (process
# isolation). wrk drives rec at concurrency C for S seconds three times: alone; while a client
# keeps calling Silero; and while that client calls and Silero's worker is killed N times at
# even intervals (SIGKILL; the server starts a fresh one each time). Reported: rec's requests/s, p50 and
# p99 in both runs, wrong or failed rec answers (none allowed), and Silero's failures and
# restarts. Bounded in time and count; loopback only. Needs wrk and Debian's python3.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=10
kills=10
conc=2
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --kills) kills=$2; shift 2 ;;
    --concurrency) conc=$2; shift 2 ;;
    *) echo "serve_kill_bench: unknown option '$1'" >&2; exit 2 ;;
  esac
done
source bench/serve_lib.sh
serve_lib_init serve_kill_bench
mkdir -p "$work/repo/rec/1" "$work/repo/silero/1"
cp "$shared/models/ppocrv4_rec/model.onnx" "$work/repo/rec/1/"
cp "$shared/models/silero_vad_v5/model.onnx" "$work/repo/silero/1/"
echo '{"threads": 1}' >"$work/repo/rec/config.json"
echo '{"threads": 1, "isolation": "process"}' >"$work/repo/silero/config.json"
/usr/bin/python3 - "$work" "$shared/models" <<'EOF'
import json, os, sys
import numpy as np
work, models = sys.argv[1], sys.argv[2]
x = np.load(os.path.join(models, "ppocrv4_rec", "inputs", "x.npy"))
h = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                            "parameters": {"binary_data_size": x.nbytes}}],
                "parameters": {"binary_data_output": True}}).encode()
open(os.path.join(work, "rec.body"), "wb").write(h + x.tobytes())
open(os.path.join(work, "rec.hdr"), "w").write(str(len(h)))
ins = {n: np.load(os.path.join(models, "silero_vad_v5", "inputs", n + ".npy")) for n in ("input", "state", "sr")}
req = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": "INT64" if n == "sr" else "FP32",
                   "data": a.flatten().tolist()} for n, a in ins.items()]}
open(os.path.join(work, "silero.json"), "w").write(json.dumps(req))
EOF
serve_start "$work/repo"

rec_load() {
  BODY="$work/rec.body" HDR=$(cat "$work/rec.hdr") wrk -t 1 -c "$conc" -d "${duration}s" --timeout 30s \
    -s "$work/post.lua" "$url/v2/models/rec/infer" | awk '/^RESULT/'
}
report() {  # LABEL RESULT-LINE
  read -r _ n secs p50 p99 bad timeouts <<<"$2"
  printf '%-34s %8.1f %9.2f %9.2f %8s %9s\n' "$1" "$(awk -v n="$n" -v s="$secs" 'BEGIN {print n / s}')" "$p50" "$p99" "$bad" "$timeouts"
}
worker_pid() { pgrep -P "$server_pid" -f worker | head -1; }

printf '%-34s %8s %9s %9s %8s %9s\n' "rec (wrk -c $conc, ${duration}s)" "req/s" "p50 ms" "p99 ms" "non-2xx" "timeouts"
quiet=$(rec_load)
report "undisturbed" "$quiet"

# Silero called in a loop during rec's load, first with its worker left alone, then with it
# killed every duration/(kills+1) seconds: the difference is what the crashes cost rec.
silero_calls() {  # writes "answered failed" to $work/silero.counts
  local end=$((SECONDS + duration)) ok=0 failed=0 code
  while [ $SECONDS -lt $end ]; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$work/silero.json" "$url/v2/models/silero/infer")
    [ "$code" = 200 ] && ok=$((ok + 1)) || failed=$((failed + 1))
  done
  echo "$ok $failed" >"$work/silero.counts"
}
silero_calls &
caller=$!
calm=$(rec_load)
wait "$caller"
report "with Silero traffic" "$calm"
read -r calm_ok calm_failed <"$work/silero.counts"

silero_calls &
caller=$!
(
  for _ in $(seq "$kills"); do
    sleep "$(awk -v d="$duration" -v k="$kills" 'BEGIN {print d / (k + 1)}')"
    p=$(worker_pid || true)
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null || true
  done
) &
killer=$!
busy=$(rec_load)
wait "$killer" "$caller"
report "... and Silero's worker killed" "$busy"
read -r ok failed <"$work/silero.counts"
restarts=$(curl -s "$url/metrics" | awk '/^bulkhead_worker_restarts_total\{model="silero"/ {print $2}')
echo "silero: $calm_ok answered / $calm_failed failed undisturbed; $ok answered / $failed failed (its in-flight requests at the kills) while killed; worker restarts $restarts of $kills kills"
read -r _ _ _ _ q99 _ _ <<<"$calm"
read -r _ _ _ _ b99 _ _ <<<"$busy"
awk -v q="$q99" -v b="$b99" 'BEGIN {printf "rec p99 while the worker is killed: %+.1f%% against the same traffic without kills\n", (b / q - 1) * 100}'
