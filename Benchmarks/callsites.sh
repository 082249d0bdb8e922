#!/usr/bin/env bash
# callsites.sh — machine code per `addBreadcrumb` call site in a consumer's release build
# (goal ≤ 1 KB a call site).
#
# Builds two consumers of the CrumbsRecorder product, -c release: CallSites, with 100 call sites
# in four functions of 25 (one shape of call each), and CallSitesNone, the same source without
# them. Per call site = (CallSites' .text − CallSitesNone's .text) / 100: what the call sites
# cost, with whatever the compiler emits once for all of them (outlined or specialized copies of
# the append). Then, per shape, what each function's own code grew by, / 25: the part inlined
# at every call site.
#
# Usage: Benchmarks/callsites.sh
# Env:   SWIFT (default swift); BENCH_SUMMARY (make bench): where the headline figure is added.
set -euo pipefail

cd "$(dirname "$0")"
swift=${SWIFT:-swift}
"$swift" build -c release --product CallSites >/dev/null
"$swift" build -c release --product CallSitesNone >/dev/null
bin=$("$swift" build -c release --show-bin-path)

text_size() { size -A "$1" | awk '$1 == ".text" { print $2 }'; }
symbol_size() { # binary module function → size in bytes of the function's symbol
  local hex
  hex=$(nm -S --defined-only "$1" | awk -v name="$3" -v module="$2" \
    '$4 ~ (module length(name) name "yy") { print $2; exit }')
  echo $((16#${hex:-0}))
}

with=$(text_size "$bin/CallSites")
without=$(text_size "$bin/CallSitesNone")
total=$((with - without))
average=$((total / 100))
echo "== Machine code per addBreadcrumb call site (release builds of Benchmarks/Sources/CallSites and CallSitesNone) =="
echo "  .text with 100 call sites: $with bytes; without them: $without bytes; difference: $total bytes"
for shape in literalMessageRuntimeValue runtimeMessageOneAttribute noAttributes interpolatedMessageThreeAttributes; do
  inlined=$(($(symbol_size "$bin/CallSites" 9CallSites "$shape") - $(symbol_size "$bin/CallSitesNone" 13CallSitesNone "$shape")))
  printf '  %-40s %5d bytes inlined at each call site\n' "$shape" $((inlined / 25))
done
verdict=$([ "$average" -le 1024 ] && echo met || echo MISSED)
echo "per call site, all 100, shared code included: $average bytes (goal ≤ 1024: $verdict)"
if [ -n "${BENCH_SUMMARY:-}" ]; then
  echo "machine code per addBreadcrumb call site|$average bytes (100 call sites, 4 shapes)|≤ 1 KB|$verdict" >>"$BENCH_SUMMARY"
fi
