#!/usr/bin/env bash
# Runs the README's first command (scripts/demo.sh) and checks what it printed, as CI does
# on a fresh Debian 12 root: the two concurrent sessions matched their solo runs, and the
# checker's verdict table has every row it must have with the verdict it must have:
#   cpu:0 and vulkan:0 (lavapipe, installed by scripts/install-deps.sh), in-process and in
#   two workers: clean; faulty:none: clean; each of the four planted faults: contaminated.
# usage: scripts/demo-verdict.sh [DEMO_OUTPUT_FILE]
#   with a file, checks that output instead of running the demo.
# Exit 0 when all holds; 1 with one line per problem otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ $# -ge 1 ]; then
  out=$1
  rc=0
else
  out=$(mktemp)
  trap 'rm -f "$out"' EXIT
  scripts/demo.sh | tee "$out"
  rc=${PIPESTATUS[0]}
fi

problems=()
[ "$rc" = 0 ] || problems+=("scripts/demo.sh exited $rc")
grep -q '^2 sessions x 200 concurrent runs on 2 threads: 0 of 400 results differed' "$out" ||
  problems+=("the two concurrent sessions did not all match their solo runs")

# The table: from its header to the first blank line; columns device, sessions, verdict.
table=$(awk '/^device +sessions +verdict/{f=1; next} f&&/^$/{exit} f' "$out")
[ -n "$table" ] || problems+=("no verdict table in the demo's output")
expect() {  # DEVICE SESSIONS VERDICT (the verdict column starts with VERDICT)
  local row verdict
  row=$(grep -E "^$1 +$2 " <<<"$table" | head -n1)
  if [ -z "$row" ]; then problems+=("no row for $1 ($2)"); return; fi
  verdict=$(sed -E "s/^$1 +$2 +//" <<<"$row")
  case "$verdict" in
    "$3" | "$3 "*) ;;
    *) problems+=("$1 ($2): expected '$3', got '$verdict'") ;;
  esac
}
for dev in cpu:0 vulkan:0; do
  expect "$dev" in-process clean
  expect "$dev" "two workers" clean
done
expect faulty:none in-process clean
for fault in shared-scratch global-slot dropped-dependency stale-replay; do
  expect "faulty:$fault" in-process "contaminated (meant)"
done
grep -q '^every real device is watertight; every planted fault was caught$' "$out" ||
  problems+=("the demo's closing line is not 'every real device is watertight; every planted fault was caught'")

if [ ${#problems[@]} -gt 0 ]; then
  for p in "${problems[@]}"; do echo "demo-verdict: $p" >&2; done
  exit 1
fi
echo "demo-verdict: the demo's verdict table is as it must be ($(wc -l <<<"$table") rows)"
