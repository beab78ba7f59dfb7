#!/usr/bin/env bash
# Installs what is missing, builds bulkhead and runs every test:
#   1. the release build: unit, concurrency, CLI, real-model and conformance tests, the
#      C API (from C, and installed and used from outside the tree) and the Python
#      package (Debian's python3-pytest), examples included;
#   2. the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer
#      (LeakSanitizer included), built with clang and instrumented for libFuzzer: the
#      same build makes the fuzz harnesses of stage 4;
#   3. the concurrency and process-isolation tests under ThreadSanitizer (GCC);
#   4. each libFuzzer harness (scripts/fuzz.sh) for 30 s ($BULKHEAD_FUZZ_SECONDS), as
#      many at once as there are cores.
# Needs ../shared beside the repository (or BULKHEAD_SHARED=<path>).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
shared=${BULKHEAD_SHARED:-$(cd .. && pwd)/shared}
if [ ! -d "$shared/models" ]; then
  echo "test: the shared test data folder '$shared' is missing (set BULKHEAD_SHARED)" >&2
  exit 1
fi

# Each stage's start, with the time since this script began (CI's budget is watched here).
step() { printf '\n=== %s (at %d s)\n' "$*" "$SECONDS"; }

step "release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBULKHEAD_SHARED_DIR="$shared" >/dev/null
cmake --build build -j "$jobs"
# conformance_vulkan and conformance_opencl (the whole suite again on lavapipe, ~6 min, and
# on PoCL, ~6 min) are left to `ctest -L conformance-vulkan|opencl`; vulkan_test,
# opencl_direct_test, opencl_models_test and matrix_test cover those backends here.
# Two tests at a time on 2 cores: much of the suite waits on processes, pipes and
# servers (163 -> 116 s measured); the sanitizer stages below stay one at a time.
(cd build && ctest --output-on-failure --timeout 1800 -j "$jobs" -LE 'conformance-(vulkan|opencl)')

step "ASan + UBSan build (clang, coverage-instrumented: also the fuzz harnesses' build): unit tests"
# One sanitizer build of the library serves the unit tests and the fuzz harnesses. A
# build-asan/ left by a GCC configuration is made again with clang.
if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:FILEPATH=.*clang++' build-asan/CMakeCache.txt; then
  rm -rf build-asan
fi
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBULKHEAD_SANITIZE=fuzz \
  -DBULKHEAD_SHARED_DIR="$shared" >/dev/null
cmake --build build-asan -j "$jobs" --target capi_test plugin_test memory_test io_test stress_test import_test infer_test session_test optimize_test layout_test executor_test faulty_test check_test serve_test fuzzers
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -L unit)

step "TSan build: concurrency and isolation tests"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBULKHEAD_SANITIZE=thread \
  -DBULKHEAD_SHARED_DIR="$shared" >/dev/null
cmake --build build-tsan -j "$jobs" --target concurrency_test core_budget_test stress_test isolation_test plugin_test serve_test bulkhead
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --output-on-failure -L 'concurrency|isolation')

step "fuzz harnesses (clang, libFuzzer, ASan+UBSan): ${BULKHEAD_FUZZ_SECONDS:-30} s each"
scripts/fuzz.sh -b build-asan -p "$jobs" -t "${BULKHEAD_FUZZ_SECONDS:-30}"

step "all test stages passed"
