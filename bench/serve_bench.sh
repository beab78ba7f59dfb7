#!/usr/bin/env bash
# serve_bench: `bulkhead serve` under load from wrk on 127.0.0.1, against what the same
# models cost through the C++ API (`bulkhead run`, same threads).
#
#   bench/serve_bench.sh [--duration S] [--concurrency "1 8 32"] [--out DIR]
#
# Rows: a tiny model (4 floats through Add: the server's own cost per request, JSON and
# binary), rec (JSON) and det (binary), in-process and in a worker process, at each
# concurrency; an Identity model on a 16 MiB tensor (binary) for the bytes per second a
# request moves; then the same over gRPC (raw tensor contents) with build/grpc_load. Reported: requests/s and wrk's p50/p99 latency; "overhead" is the p50 at
# concurrency 1 minus the C++ API's median for the model; "GB/s" counts the request's and
# the response's tensor bytes over the p50 less the model's own time.
# Everything listens on and targets 127.0.0.1 only; each wrk run is bounded by --duration.
# Needs wrk (Debian `wrk`), Debian's python3 with onnx, numpy and grpcio, protoc with
# grpc_python_plugin (scripts/install-deps.sh) and build/grpc_load.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=5
concurrency="1 8 32"
out=bench/out/serve
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "serve_bench: unknown option '$1'" >&2; exit 2 ;;
  esac
done
source bench/serve_lib.sh
serve_lib_init serve_bench
mkdir -p "$out"
# The repository and the request bodies.
/usr/bin/python3 - "$work" "$shared/models" <<'EOF'
import json, os, shutil, sys
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
work, models = sys.argv[1], sys.argv[2]
repo = os.path.join(work, "repo")
def add_model(name, src, config):
    os.makedirs(os.path.join(repo, name, "1"))
    shutil.copyfile(src, os.path.join(repo, name, "1", "model.onnx"))
    with open(os.path.join(repo, name, "config.json"), "w") as f:
        json.dump(config, f)
def save(g, path):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
    onnx.save(m, path)
one = numpy_helper.from_array(np.ones([4], np.float32), "one")
save(helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "tiny",
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [one]), os.path.join(work, "tiny.onnx"))
save(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "ident",
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1024, 1024])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1024, 1024])]), os.path.join(work, "ident.onnx"))
threads = {"threads": 1, "instances": 2}
add_model("tiny", os.path.join(work, "tiny.onnx"), threads)
add_model("ident", os.path.join(work, "ident.onnx"), threads)
for m in ("ppocrv4_rec", "ppocrv4_det"):
    add_model(m, os.path.join(models, m, "model.onnx"), threads)
    add_model(m + "_process", os.path.join(models, m, "model.onnx"), dict(threads, isolation="process"))
def write_json(name, inputs):
    body = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": "FP32", "data": a.flatten().tolist()} for n, a in inputs]}
    open(os.path.join(work, name + ".body"), "w").write(json.dumps(body))
    open(os.path.join(work, name + ".hdr"), "w").write("")
def write_binary(name, inputs):
    header = {"inputs": [], "parameters": {"binary_data_output": True}}
    raw = b""
    for n, a in inputs:
        b = np.ascontiguousarray(a).tobytes()
        header["inputs"].append({"name": n, "shape": list(a.shape), "datatype": "FP32", "parameters": {"binary_data_size": len(b)}})
        raw += b
    h = json.dumps(header).encode()
    open(os.path.join(work, name + ".body"), "wb").write(h + raw)
    open(os.path.join(work, name + ".hdr"), "w").write(str(len(h)))
x4 = np.arange(4, dtype=np.float32)
write_json("tiny_json", [("x", x4)])
write_binary("tiny_binary", [("x", x4)])
write_binary("ident_binary", [("x", np.random.RandomState(1).rand(4, 1024, 1024).astype(np.float32))])
write_json("rec_json", [("x", np.load(os.path.join(models, "ppocrv4_rec", "inputs", "x.npy")))])
write_binary("det_binary", [("x", np.load(os.path.join(models, "ppocrv4_det", "inputs", "x.npy")))])
EOF

# The same requests as gRPC messages (raw_input_contents), serialized for grpc_load.
protoc -I src/serve --python_out="$work" --grpc_python_out="$work" \
  --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" src/serve/grpc_predict_v2.proto
/usr/bin/python3 - "$work" "$shared/models" <<'EOF'
import os, sys
import numpy as np
work, models = sys.argv[1], sys.argv[2]
sys.path.insert(0, work)
import grpc_predict_v2_pb2 as pb
def write(name, model, inputs):
    r = pb.ModelInferRequest(model_name=model)
    for n, a in inputs:
        r.inputs.add(name=n, datatype="FP32", shape=list(a.shape))
        r.raw_input_contents.append(np.ascontiguousarray(a).tobytes())
    open(os.path.join(work, name + ".grpcreq"), "wb").write(r.SerializeToString())
write("tiny", "tiny", [("x", np.arange(4, dtype=np.float32))])
write("ident", "ident", [("x", np.random.RandomState(1).rand(4, 1024, 1024).astype(np.float32))])
rec = np.load(os.path.join(models, "ppocrv4_rec", "inputs", "x.npy"))
det = np.load(os.path.join(models, "ppocrv4_det", "inputs", "x.npy"))
for suffix in ("", "_process"):
    write("rec" + suffix, "ppocrv4_rec" + suffix, [("x", rec)])
    write("det" + suffix, "ppocrv4_det" + suffix, [("x", det)])
EOF

serve_start "$work/repo" --http-threads 96 --grpc-port 0
grpc_target=$(awk '/gRPC on/ {print $NF}' "$work/serve.out")

# The C++ API's median for each model (the same inputs, 1 thread).
api_ms() { "$bin" run "$1" "${@:2}" -t 1 -r 50 -q 2>&1 | awk '/latency over/ {print $6}'; }
/usr/bin/python3 -c "import numpy as np; np.save('$work/x4.npy', np.arange(4, dtype=np.float32)); np.save('$work/big.npy', np.random.RandomState(1).rand(4,1024,1024).astype(np.float32))"
declare -A api
api[tiny]=$(api_ms "$work/tiny.onnx" -i "x=$work/x4.npy")
api[ident]=$(api_ms "$work/ident.onnx" -i "x=$work/big.npy")
api[rec]=$(api_ms "$shared/models/ppocrv4_rec/model.onnx" -i "x=$shared/models/ppocrv4_rec/inputs/x.npy")
api[det]=$(api_ms "$shared/models/ppocrv4_det/model.onnx" -i "x=$shared/models/ppocrv4_det/inputs/x.npy")

results="$out/results.txt"
printf '%-22s %-12s %5s %10s %10s %10s %10s %12s %8s\n' model body conc "req/s" "p50 ms" "p99 ms" "API ms" "overhead us" "GB/s" | tee "$results"
run() {  # MODEL BODY [KIND]
  local model=$1 body=$2 kind=${3:-}
  for c in $concurrency; do
    local threads=$(( c < 2 ? 1 : 2 ))
    local line
    line=$(BODY="$work/$body.body" HDR=$(cat "$work/$body.hdr") wrk -t "$threads" -c "$c" -d "${duration}s" --timeout 30s \
           -s "$work/post.lua" "$url/v2/models/$model/infer" | awk '/^RESULT/')
    read -r _ n secs p50 p99 bad timeouts <<<"$line"
    local base=${api[$kind]:-0} over="" gbs=""
    if [ "$c" = 1 ]; then
      over=$(awk -v a="$p50" -v b="$base" 'BEGIN {printf "%.0f", (a - b) * 1000}')
      if [ "$kind" = ident ]; then
        gbs=$(awk -v a="$p50" -v b="$base" 'BEGIN {printf "%.2f", 2 * 16777216 / ((a - b) / 1000) / 1e9}')
      fi
    fi
    printf '%-22s %-12s %5s %10.1f %10.3f %10.3f %10s %12s %8s' "$model" "$body" "$c" "$(awk -v n="$n" -v s="$secs" 'BEGIN {print n / s}')" \
      "$p50" "$p99" "$base" "$over" "$gbs" | tee -a "$results"
    [ "$bad" != 0 ] || [ "$timeouts" != 0 ] && printf '  (%s non-2xx, %s timeouts)' "$bad" "$timeouts" | tee -a "$results"
    echo | tee -a "$results"
  done
}
# run_grpc REQUEST KIND: the same columns, from grpc_load.
run_grpc() {
  local req=$1 kind=$2
  for c in $concurrency; do
    local line
    line=$("$grpc_load" --target "$grpc_target" --request "$work/$req.grpcreq" --concurrency "$c" --duration "$duration" | awk '/^RESULT/')
    read -r _ n secs p50 p99 bad <<<"$line"
    local base=${api[$kind]:-0} over="" gbs=""
    if [ "$c" = 1 ]; then
      over=$(awk -v a="$p50" -v b="$base" 'BEGIN {printf "%.0f", (a - b) * 1000}')
      if [ "$kind" = ident ]; then
        gbs=$(awk -v a="$p50" -v b="$base" 'BEGIN {printf "%.2f", 2 * 16777216 / ((a - b) / 1000) / 1e9}')
      fi
    fi
    printf '%-22s %-12s %5s %10.1f %10.3f %10.3f %10s %12s %8s' "$req" "grpc_raw" "$c" "$(awk -v n="$n" -v s="$secs" 'BEGIN {print n / s}')" \
      "$p50" "$p99" "$base" "$over" "$gbs" | tee -a "$results"
    [ "$bad" != 0 ] && printf '  (%s errors)' "$bad" | tee -a "$results"
    echo | tee -a "$results"
  done
}
run tiny tiny_json tiny
run tiny tiny_binary tiny
run ident ident_binary ident
run ppocrv4_rec rec_json rec
run ppocrv4_rec_process rec_json rec
run ppocrv4_det det_binary det
run ppocrv4_det_process det_binary det
grpc_load=${BULKHEAD_GRPC_LOAD:-$(dirname "$bin")/grpc_load}
[ -x "$grpc_load" ] || { echo "serve_bench: $grpc_load is not built (cmake --build build --target grpc_load)" >&2; exit 1; }
run_grpc tiny tiny
run_grpc ident ident
run_grpc rec rec
run_grpc rec_process rec
run_grpc det det
run_grpc det_process det
echo "serve_bench: results in $results"
