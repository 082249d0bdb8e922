#!/usr/bin/env bash
# callsites.sh — machine code per `addBreadcrumb` call site in a consumer's release build
# (goal ≤ 1 KB a call site).
#
# Builds the CallSites program (-c release: the append is @inlinable, so each call site carries
# what the optimizer inlines there), then reads the size of each of its functions from the symbol
# table: four functions of 25 call sites each (one shape of call each) and `scaffoldingOnly`, the same
# scaffolding without one. Per call site: (function − scaffolding) / 25. Out-of-line code shared
# by every call site (the C append, the slow paths) is not counted: it is in the binary once.
#
# Usage: Benchmarks/callsites.sh
# Env:   SWIFT (default swift); BENCH_SUMMARY (make bench): where the headline figure is added.
set -euo pipefail

cd "$(dirname "$0")"
swift=${SWIFT:-swift}
"$swift" build -c release --product CallSites >/dev/null
binary=$("$swift" build -c release --show-bin-path)/CallSites

size_of() { # function name → size in bytes of its symbol
  local hex
  hex=$(nm -S --defined-only "$binary" | awk -v name="$1" '$4 ~ ("CallSites" length(name) name "yy") { print $2; exit }')
  echo $((16#${hex:-0}))
}

scaffold=$(size_of scaffoldingOnly)
echo "== Machine code per addBreadcrumb call site (release build of Benchmarks/Sources/CallSites) =="
total=0
for shape in literalMessageRuntimeValue runtimeMessageOneAttribute noAttributes interpolatedMessageThreeAttributes; do
  bytes=$(size_of "$shape")
  per=$(((bytes - scaffold) / 25))
  total=$((total + bytes - scaffold))
  printf '  %-40s %6d bytes for 25 call sites: %5d bytes each\n' "$shape" "$bytes" "$per"
done
average=$((total / 100))
verdict=$([ "$average" -le 1024 ] && echo met || echo MISSED)
echo "per call site, all 100: $average bytes (goal ≤ 1024: $verdict); scaffolding alone: $scaffold bytes"
if [ -n "${BENCH_SUMMARY:-}" ]; then
  echo "machine code per addBreadcrumb call site|$average bytes (100 call sites, 4 shapes)|≤ 1 KB|$verdict" >>"$BENCH_SUMMARY"
fi
