#!/usr/bin/env bash
# bulkhead vs ONNX Runtime (onnxruntime-node 1.30.0, CPU), side by side on one machine.
#
#   bench/bench.sh [--models all|a,b] [--threads 1,2] [--rounds R] [--runs auto|N] [--warmup 2] [--no-build]
#                  [--sessions 1,4,8|none] [--sessions-model light_resnet50]
#                  [--busy none|a,b] [--busy-threads 2] [--bf16 none|all|a,b] [--int8 none|a,b]
#                  [--pin auto|off]
#
# Models (default all twelve): the nine ONNX backend "light" models (light_bvlc_alexnet,
# light_densenet121, light_inception_v1, light_inception_v2, light_resnet50,
# light_shufflenet, light_squeezenet, light_vgg19, light_zfnet512; synthetic input
# arange(n)/n) and ppocrv4_det, ppocrv4_rec, silero_vad_v5 (real models, reference inputs).
# Data: $BULKHEAD_SHARED, default <repo>/../shared. Output: bench/out/results.json,
# bench/out/chart.svg, bench/out/raw.jsonl. See bench/README.md for what is measured.
# --sessions: resident memory of 1, 4 and 8 sessions of --sessions-model in one process,
# bulkhead (sessions_bench: weights shared; after the runs and once idle) against ONNX
# Runtime (ort_sessions.js), 1 thread; "none" skips it.
# --busy: the listed models again at --busy-threads threads, quiet and while another
# process keeps one core busy (a busy loop), both tools; default none.
# --bf16: the listed models ("all" = those of --models) at --threads: bulkhead
# --precision bf16 against bulkhead fp32 and ORT fp32, and bf16's outputs against fp32's.
# --int8: the listed models quantised by `bulkhead quantize` (QDQ, into bench/out/qdq/),
# bulkhead against ORT on that file; a model quantize refuses is noted. Both default none.
# --pin auto (default): a process with fewer threads than there are cores runs pinned to as
# many cores (taskset), the same ones for both tools in a round and the next ones the round
# after (a VM's cores can run at different speeds for minutes); off: not pinned.
#
# What it sets up, as needed (apt-get needs root; elsewhere install by hand):
#   - node + npm: Debian's `nodejs` and `npm` packages when `node` is missing. Debian 12
#     ships Node 18; onnxruntime-node 1.30 needs Node >= 16 (its README; the binding is
#     N-API v6) and glibc >= 2.28 on linux-x64 (Debian 12 has 2.36). Tested here on Node 20.
#   - onnxruntime-node 1.30.0 into bench/node_modules, with ONNXRUNTIME_NODE_INSTALL=skip:
#     the npm package already carries the CPU binaries for linux-x64, and the skip stops
#     its install script from fetching the (unbundled) CUDA execution-provider binaries.
#   - GNU time (Debian's `time`), to measure each process's peak resident memory.
#   - bulkhead: cmake + ninja into build-bench (RelWithDebInfo, no tests), incremental.
#     --no-build uses the binary as it is; BULKHEAD_BIN=path uses another binary;
#     BENCH_BUILD_JOBS sets ninja's -j (default 2).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
shared=${BULKHEAD_SHARED:-$here/../../shared}
ort_version=1.30.0

all_models=light_bvlc_alexnet,light_densenet121,light_inception_v1,light_inception_v2,light_resnet50,light_shufflenet,light_squeezenet,light_vgg19,light_zfnet512,ppocrv4_det,ppocrv4_rec,silero_vad_v5
models=all
threads=1,2
rounds=3
runs=auto   # each model's own count (run_bench.js MODELS), about the same time per process
warmup=2
build=1
sessions=1,4,8
sessions_model=light_resnet50
busy=none
busy_threads=2
bf16=none
int8=none
pin=auto

usage() {
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || { echo "bench: $1 needs a value" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --models) need_value "$@"; models=$2; shift 2 ;;
    --threads) need_value "$@"; threads=$2; shift 2 ;;
    --rounds) need_value "$@"; rounds=$2; shift 2 ;;
    --runs) need_value "$@"; runs=$2; shift 2 ;;
    --warmup) need_value "$@"; warmup=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --sessions) need_value "$@"; sessions=$2; shift 2 ;;
    --sessions-model) need_value "$@"; sessions_model=$2; shift 2 ;;
    --busy) need_value "$@"; busy=$2; shift 2 ;;
    --busy-threads) need_value "$@"; busy_threads=$2; shift 2 ;;
    --bf16) need_value "$@"; bf16=$2; shift 2 ;;
    --int8) need_value "$@"; int8=$2; shift 2 ;;
    --pin) need_value "$@"; pin=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $pin == auto || $pin == off ]] || { echo "bench: --pin must be auto or off, got '$pin'" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench: --rounds must be a positive integer, got '$rounds'" >&2; exit 2; }
[[ $runs == auto || $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench: --runs must be auto or a positive integer, got '$runs'" >&2; exit 2; }
[[ $warmup =~ ^[0-9]+$ ]] || { echo "bench: --warmup must be a non-negative integer, got '$warmup'" >&2; exit 2; }
[[ $threads =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "bench: --threads must look like 1,2, got '$threads'" >&2; exit 2; }
[[ $sessions == none || $sessions =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "bench: --sessions must look like 1,4,8 or be none, got '$sessions'" >&2; exit 2; }
[[ $busy_threads =~ ^[1-9][0-9]*$ ]] || { echo "bench: --busy-threads must be a positive integer, got '$busy_threads'" >&2; exit 2; }
[ "$models" = all ] && models=$all_models
known_models=" ${all_models//,/ } "
[[ $busy == none || $busy =~ ^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$ ]] || { echo "bench: --busy must look like a,b or be none, got '$busy'" >&2; exit 2; }
[[ $bf16 == none || $bf16 == all || $bf16 =~ ^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$ ]] || { echo "bench: --bf16 must look like a,b or be all or none, got '$bf16'" >&2; exit 2; }
[[ $int8 == none || $int8 =~ ^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$ ]] || { echo "bench: --int8 must look like a,b or be none, got '$int8'" >&2; exit 2; }
[ "$bf16" = all ] && bf16=$models
for opt in busy bf16 int8; do
  list=${!opt}
  [ "$list" = none ] && continue
  for m in ${list//,/ }; do
    [[ $known_models == *" $m "* ]] || { echo "bench: unknown --$opt model '$m' (known:$known_models)" >&2; exit 2; }
  done
done
[[ $models =~ ^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$ ]] || { echo "bench: --models must look like a,b, got '$models'" >&2; exit 2; }
for m in ${models//,/ }; do
  [[ $known_models == *" $m "* ]] || { echo "bench: unknown model '$m' (known:$known_models)" >&2; exit 2; }
done

if [ ! -d "$shared" ]; then
  echo "bench: shared data folder not found: $shared" >&2
  echo "bench: set BULKHEAD_SHARED to the folder holding models/ and onnx-backend-data/" >&2
  exit 1
fi
shared=$(cd "$shared" && pwd)
for d in models onnx-backend-data/light; do
  [ -d "$shared/$d" ] || { echo "bench: $shared/$d is missing (BULKHEAD_SHARED=$shared)" >&2; exit 1; }
done

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "bench: missing Debian package(s) $*; install them (as root: apt-get install $*) and rerun" >&2
    exit 1
  fi
  echo "bench: installing $* with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- node, npm -------------------------------------------------------------------------
if ! command -v node >/dev/null 2>&1; then
  apt_install nodejs npm
fi
command -v npm >/dev/null 2>&1 || apt_install npm
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 16 ]; then
  echo "bench: node $(node --version) is too old; onnxruntime-node $ort_version needs Node >= 16" >&2
  exit 1
fi

# --- ONNX Runtime ----------------------------------------------------------------------
ort_installed() {
  [ "$(node -p "try { require('$here/node_modules/onnxruntime-node/package.json').version } catch (e) { '' }" 2>/dev/null)" = "$ort_version" ]
}
if ! ort_installed; then
  echo "bench: installing onnxruntime-node@$ort_version into bench/node_modules" >&2
  ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix "$here" --no-audit --no-fund "onnxruntime-node@$ort_version" >&2
  ort_installed || { echo "bench: onnxruntime-node@$ort_version did not install" >&2; exit 1; }
fi
if ! (cd "$here" && node -e "require('onnxruntime-node')") >/dev/null 2>&1; then
  echo "bench: onnxruntime-node@$ort_version is installed but does not load:" >&2
  (cd "$here" && node -e "require('onnxruntime-node')") >&2 || true
  exit 1
fi

# --- GNU time --------------------------------------------------------------------------
time_bin=/usr/bin/time
if ! "$time_bin" --version 2>&1 | grep -q 'GNU'; then
  if [ "$(id -u)" = 0 ]; then
    apt_install time
  else
    echo "bench: GNU time not found and not root: bulkhead's peak RSS will not be measured" >&2
  fi
fi
"$time_bin" --version 2>&1 | grep -q 'GNU' || time_bin=

# --- bulkhead --------------------------------------------------------------------------
if [ -n "${BULKHEAD_BIN:-}" ]; then
  bin=$BULKHEAD_BIN
  [ -x "$bin" ] || { echo "bench: BULKHEAD_BIN=$bin is not an executable" >&2; exit 1; }
else
  bin=$repo/build-bench/bulkhead
  if [ "$build" = 0 ] && [ ! -x "$bin" ]; then
    echo "bench: --no-build given but $bin does not exist" >&2
    exit 1
  fi
  if [ "$build" = 1 ]; then
    if ! command -v cmake >/dev/null 2>&1 || ! command -v ninja >/dev/null 2>&1; then
      "$repo/scripts/install-deps.sh"
    fi
    echo "bench: building bulkhead in build-bench (RelWithDebInfo)" >&2
    cmake -S "$repo" -B "$repo/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBULKHEAD_BUILD_TESTS=OFF >/dev/null
    # The lock keeps two bench.sh runs from driving ninja in build-bench at once.
    mkdir -p "$here/out"
    if command -v flock >/dev/null 2>&1; then
      flock "$here/out/build.lock" ninja -j"${BENCH_BUILD_JOBS:-2}" -C "$repo/build-bench" bulkhead sessions_bench >&2
    else
      ninja -j"${BENCH_BUILD_JOBS:-2}" -C "$repo/build-bench" bulkhead sessions_bench >&2
    fi
  fi
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
# sessions_bench is built beside the bulkhead binary.
sessions_bin=$(dirname "$bin")/sessions_bench
if [ "$sessions" != none ] && [ ! -x "$sessions_bin" ]; then
  echo "bench: $sessions_bin not found: the sessions rows are skipped" >&2
  sessions=none
fi

# --- measure ---------------------------------------------------------------------------
cd "$here"
exec node "$here/run_bench.js" --bulkhead "$bin" --shared "$shared" --out "$here/out" \
  --models "$models" --threads "$threads" --rounds "$rounds" --runs "$runs" --warmup "$warmup" \
  --sessions "$sessions" --sessions-model "$sessions_model" --sessions-bench "$sessions_bin" \
  --busy "$busy" --busy-threads "$busy_threads" --bf16 "$bf16" --int8 "$int8" --pin "$pin" \
  ${time_bin:+--time "$time_bin"}
