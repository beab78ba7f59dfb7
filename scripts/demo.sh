#!/usr/bin/env bash
# Installs what is missing, builds bulkhead, and runs `bulkhead demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target bulkhead
./build/bulkhead demo
