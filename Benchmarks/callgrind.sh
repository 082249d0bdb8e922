#!/usr/bin/env bash
# callgrind.sh — instructions per append, counted by valgrind's callgrind (these VMs have no
# hardware counters, so ordo-one/benchmark cannot report instructions here).
#
# Builds AppendCallgrind (-c release), then for each kind of append runs it under
# `valgrind --tool=callgrind` twice, with N1 and N2 appends, and prints
#     (instructions(N2) - instructions(N1)) / (N2 - N1)
# so everything that does not depend on N (process start, dynamic linking, mapping the ring, the
# first append's tid lookup) cancels out. Instruction counts are repeatable run to run, whatever
# else the machine is doing: use them to compare versions of the append, not as a time.
#
# Kinds: ring (BreadcrumbRing.append), global (addBreadcrumb through the installed ring),
# c-entry (crumbs_add_breadcrumb, the C entry point: the ring without the Swift wrapper),
# baseline (the C floor: fetch_add + memcpy + release store).
#
# Usage: Benchmarks/callgrind.sh [N1 N2]      (defaults 10000 110000)
# Env:   SWIFT (default swift), CALLGRIND_SCRATCH (swift build --scratch-path; default: .build)
#        CALLGRIND_KEEP=1 keeps the callgrind.out files (printed path) for callgrind_annotate.
set -euo pipefail

cd "$(dirname "$0")"
n1=${1:-10000}
n2=${2:-110000}
swift=${SWIFT:-swift}
scratch=()
if [ -n "${CALLGRIND_SCRATCH:-}" ]; then scratch=(--scratch-path "$CALLGRIND_SCRATCH"); fi

if ! command -v valgrind >/dev/null 2>&1; then
  echo "callgrind.sh: valgrind not found (apt-get install valgrind)" >&2
  exit 1
fi

"$swift" build -c release --product AppendCallgrind "${scratch[@]}" >/dev/null
bin=$("$swift" build -c release --show-bin-path "${scratch[@]}")/AppendCallgrind

work=$(mktemp -d "${TMPDIR:-/tmp}/crumbs-callgrind.XXXXXX")
if [ -z "${CALLGRIND_KEEP:-}" ]; then trap 'rm -rf "$work"' EXIT; fi
# valgrind 3.19 cannot read the DWARF 5 the toolchain emits: count a copy without debug info
# (the symbol table stays, so callgrind_annotate still names functions).
strip --strip-debug -o "$work/AppendCallgrind" "$bin"

instructions() { # kind count → total instructions of one run
  local out="$work/callgrind.$1.$2.out"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$work/AppendCallgrind" "$1" "$2" \
    >/dev/null 2>"$out.log" || { cat "$out.log" >&2; return 1; }
  sed -n 's/^summary: //p' "$out"
}

echo "== Instructions per append (callgrind, ($n2 - $n1) appends, setup cancelled out) =="
declare -A per_append
for kind in baseline ring global c-entry; do
  low=$(instructions "$kind" "$n1")
  high=$(instructions "$kind" "$n2")
  per_append[$kind]=$(awk -v a="$low" -v b="$high" -v n="$((n2 - n1))" 'BEGIN { printf "%.1f", (b - a) / n }')
done
printf '  %-44s %8s instructions\n' \
  "baseline C append:" "${per_append[baseline]}" \
  "ring append (BreadcrumbRing.append):" "${per_append[ring]}" \
  "addBreadcrumb (installed ring):" "${per_append[global]}" \
  "C entry (crumbs_add_breadcrumb):" "${per_append[c-entry]}"
awk -v r="${per_append[ring]}" -v b="${per_append[baseline]}" \
  'BEGIN { printf "ring append / baseline: %.1fx the instructions\n", r / b }'
if [ -n "${CALLGRIND_KEEP:-}" ]; then
  echo "callgrind outputs kept in $work (callgrind_annotate $work/callgrind.ring.$n2.out)"
fi
