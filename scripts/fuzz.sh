#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang with ASan+UBSan) in build-fuzz/, makes their
# seed corpora from ../shared, and runs each for the time asked.
#
# usage: scripts/fuzz.sh [-t SECONDS] [-j JOBS] [-p N] [-b DIR] [HARNESS...]
#   -t SECONDS  how long each harness runs (default 60)
#   -j JOBS     libFuzzer worker processes per harness (default 1)
#   -p N        harnesses run at once (default 1)
#   -b DIR      the build folder (default build-fuzz; scripts/test.sh passes build-asan,
#               the clang ASan+UBSan build its unit tests ran in)
#   HARNESS     import, npy, protocol, options, model, image, serve (default: all seven)
#
# Corpora grow in DIR/corpus/<harness>/ across runs; a crash, leak, timeout or
# out-of-memory input is saved in DIR/crashes/<harness>/ and the script exits 1.
# Prints the executions of each harness and their total.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
jobs=1
at_once=1
build=build-fuzz
while getopts "t:j:p:b:h" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    j) jobs=$OPTARG ;;
    p) at_once=$OPTARG ;;
    b) build=$OPTARG ;;
    h) sed -n '2,16p' "$0"; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(import npy protocol options model image serve)
for h in "${harnesses[@]}"; do
  case $h in import|npy|protocol|options|model|image|serve) ;; *) echo "fuzz: unknown harness '$h' (import, npy, protocol, options, model, image, serve)" >&2; exit 2 ;; esac
done
[[ $seconds =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || { echo "fuzz: -t wants a number of seconds, got '$seconds'" >&2; exit 2; }
[[ $at_once =~ ^[0-9]+$ ]] && [ "$at_once" -gt 0 ] || { echo "fuzz: -p wants a number of harnesses, got '$at_once'" >&2; exit 2; }
[[ $jobs =~ ^[0-9]+$ ]] && [ "$jobs" -gt 0 ] || { echo "fuzz: -j wants a number of processes, got '$jobs'" >&2; exit 2; }
[[ -n $build && $build != -* ]] || { echo "fuzz: -b wants a build folder, got '$build'" >&2; exit 2; }

shared=${BULKHEAD_SHARED:-$(cd .. && pwd)/shared}
[ -d "$shared/onnx-backend-data" ] || { echo "fuzz: the shared test data folder '$shared' is missing (set BULKHEAD_SHARED)" >&2; exit 1; }
command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }

CC=clang CXX=clang++ cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBULKHEAD_SANITIZE=fuzz >/dev/null
cmake --build $build -j "$(nproc)" --target fuzzers

# Seed corpora, from ../shared (and, for the protocol and the server, from the harnesses themselves).
seeds=$build/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{import,npy,protocol,options,model,image,serve}
n=0
while IFS= read -r -d '' f; do
  [ "$(stat -c %s "$f")" -le 65536 ] || continue
  n=$((n + 1))
  cp "$f" "$seeds/import/$n.onnx"
done < <(find "$shared/onnx-backend-data" -name '*.onnx' -print0 | sort -z)
cp "$seeds"/import/* "$seeds/model/"
find "$shared/models" -name '*.npy' -size -1024k -exec cp -t "$seeds/npy" {} +
# The ImageDecoder cases' encoded images (one of each format), out of their TensorProtos.
/usr/bin/python3 - "$shared/onnx-backend-data/node" "$seeds/image" <<'PY'
import glob, os, sys
from onnx import TensorProto, numpy_helper
for d in sorted(glob.glob(os.path.join(sys.argv[1], "test_image_decoder_*"))):
    t = TensorProto()
    with open(os.path.join(d, "test_data_set_0", "input_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    with open(os.path.join(sys.argv[2], os.path.basename(d)), "wb") as f:
        f.write(numpy_helper.to_array(t).tobytes())
PY
i=0
for o in "devices=cpu;threads=2" "devices=vulkan:0,cpu;submit_policy=auto:8M" "graph_capture=0;optimization_level=1" \
         "isolation=process;worker_timeout_ms=5000" "max_file_bytes=64G;max_tensor_bytes=512M" "run_timeout_ms=250;max_loop_iterations=100" \
         "auto:16K" "split" "-5" "18446744073709551615"; do
  i=$((i + 1))
  printf '%s' "$o" >"$seeds/options/$i"
done
BULKHEAD_FUZZ_SEEDS="$seeds/protocol" $build/fuzz/protocol_fuzz >/dev/null 2>&1 || true
BULKHEAD_FUZZ_SEEDS="$seeds/serve" $build/fuzz/serve_fuzz >/dev/null 2>&1 || true

# fuzz_one HARNESS: runs it, its log in $build/fuzz-HARNESS.log, exit status in .rc.
fuzz_one() {
  local h=$1 corpus=$build/corpus/$1 crashes=$build/crashes/$1 args rc
  mkdir -p "$corpus" "$crashes"
  args=(-max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$crashes/")
  case $h in
    import|model) args+=(-max_len=65536) ;;
    npy) args+=(-max_len=1048576) ;;
    image) args+=(-max_len=65536) ;;
    protocol|serve) args+=(-max_len=16384) ;;
    options) args+=(-max_len=256) ;;
  esac
  [ "$jobs" -gt 1 ] && args+=(-fork="$jobs" -ignore_crashes=0)
  set +e
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/fuzz/${h}_fuzz" "${args[@]}" "$corpus" "$seeds/$h" >"$build/fuzz-$h.log" 2>&1
  rc=$?
  set -e
  echo $rc >"$build/fuzz-$h.rc"
}

# At most $at_once harnesses at a time; the results are reported in the order asked.
running=0
for h in "${harnesses[@]}"; do
  rm -f "$build/fuzz-$h.rc"
  if [ $running -ge "$at_once" ]; then wait -n || true; running=$((running - 1)); fi
  fuzz_one "$h" &
  running=$((running + 1))
done
wait

total=0
failed=0
for h in "${harnesses[@]}"; do
  crashes=$build/crashes/$h
  log=$build/fuzz-$h.log
  rc=$(cat "$build/fuzz-$h.rc" 2>/dev/null || echo 125)
  execs=$(awk -F: '/stat::number_of_executed_units/ {gsub(/ /, "", $2); n = $2} END {print n + 0}' "$log")
  if [ "$execs" = 0 ]; then  # no final statistics (a crash, or -fork): the last progress line
    execs=$(grep -oE '^#[0-9]+' "$log" | tail -n1 | tr -d '#')
    execs=${execs:-0}
  fi
  total=$((total + execs))
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz: $h: FAILED after $execs executions (exit $rc); inputs in $crashes, log $log:"
    grep -E 'ERROR: |SUMMARY: |Test unit written' "$log" | head -n 8
  else
    printf 'fuzz: %-9s %12d executions in %ss, no crash (corpus %d inputs)\n' "$h" "$execs" "$seconds" "$(ls "$build/corpus/$h" | wc -l)"
  fi
done
printf 'fuzz: %d executions in all\n' "$total"
exit $failed
