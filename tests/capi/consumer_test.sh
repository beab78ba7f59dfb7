#!/usr/bin/env bash
# Installs bulkhead (`cmake --install`) into a temporary prefix and uses it as a project
# outside the tree would: examples/c/run_model.c built with find_package(bulkhead) and
# with pkg-config, run on Silero VAD in process and with process isolation (the worker is
# found beside the installed library), and the installed Python package imported and run.
#
# usage: consumer_test.sh BUILD_DIR SOURCE_DIR SHARED_DIR
set -euo pipefail
build=$1 src=$2 shared=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
m=$shared/models/silero_vad_v5
[ -f "$m/model.onnx" ] || { echo "consumer_test: the shared test data is missing: $m" >&2; exit 1; }
ins=(input="$m/inputs/input.npy" state="$m/inputs/state.npy" sr="$m/inputs/sr.npy")

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
echo "installed: $(cd "$tmp/prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

echo "--- find_package(bulkhead)"
cmake -S "$src/tests/capi/consumer" -B "$tmp/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DEXAMPLE_DIR="$src/examples/c" >/dev/null
cmake --build "$tmp/cmake" >/dev/null
"$tmp/cmake/run_model" "$m/model.onnx" "${ins[@]}" --threads 1 --expect "$m/outputs" --tolerance 1e-5
env -u BULKHEAD_WORKER "$tmp/cmake/run_model" "$m/model.onnx" "${ins[@]}" --isolation process --expect "$m/outputs" --tolerance 1e-5

echo "--- pkg-config bulkhead"
pc_dir=$(dirname "$(find "$tmp/prefix" -name bulkhead.pc)")
flags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs bulkhead)
libdir=$(PKG_CONFIG_PATH=$pc_dir pkg-config --variable=libdir bulkhead)
cc -std=c11 -I"$src/examples/c" "$src/examples/c/run_model.c" $flags -Wl,-rpath,"$libdir" -lm -o "$tmp/run_model_pc"
"$tmp/run_model_pc" "$m/model.onnx" "${ins[@]}" --expect "$m/outputs" --tolerance 1e-5

echo "--- a backend plugin built out of tree against the installed headers (src/backends/opencl)"
cmake -S "$src/src/backends/opencl" -B "$tmp/opencl" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/opencl" >/dev/null
plugin=$tmp/opencl/libbulkhead_opencl.so
# It links nothing of bulkhead, and exports the entry alone.
! ldd "$plugin" | grep -q libbulkhead
[ "$(nm -D --defined-only "$plugin" | awk '$2 == "T" {print $3}')" = bh_backend_plugin_entry ]
BULKHEAD_BACKEND_LIBS=$plugin "$tmp/prefix/bin/bulkhead" devices | grep -q "opencl .*$plugin"
BULKHEAD_BACKEND_LIBS=$plugin "$tmp/cmake/run_model" "$m/model.onnx" "${ins[@]}" --device opencl,cpu --expect "$m/outputs" --tolerance 1e-4
# The installed copy (LIBDIR/bulkhead) is found by name.
"$tmp/prefix/bin/bulkhead" devices | grep -q "^opencl .*discovered in"

echo "--- the installed Python package"
py_dir=$(dirname "$(dirname "$(find "$tmp/prefix" -name '_bulkhead*.so')")")
env -u BULKHEAD_WORKER PYTHONPATH="$py_dir" /usr/bin/python3 - "$m" <<'PY'
import os, sys
import numpy as np
import bulkhead
m = sys.argv[1]
feed = {n: np.load(os.path.join(m, "inputs", n + ".npy")) for n in ("input", "state", "sr")}
ref = np.load(os.path.join(m, "outputs", "output.npy"))
assert bulkhead.__file__.startswith(os.environ["PYTHONPATH"]), bulkhead.__file__
for isolation in ("in-process", "process"):
    s = bulkhead.Env().load(os.path.join(m, "model.onnx"), isolation=isolation)
    d = float(np.abs(s.run(feed)["output"] - ref).max())
    print("python %s: max|diff| %.3g" % (isolation, d))
    assert d <= 1e-5
PY
echo "consumer_test: ok"
