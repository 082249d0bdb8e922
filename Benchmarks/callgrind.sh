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
# Kinds (AppendKind in AppendWorkloads): baseline (the C floor: fetch_add + memcpy + release
# store), literal (ring.append, every string a literal), runtime (ring.append with a run-time
# message and value, as applications write it), global (addBreadcrumb the same way, through the
# installed ring), c-entry (crumbs_add_breadcrumb_utf8: the ring without the Swift wrapper).
# With BENCH_SUMMARY set (make bench), the headline figures are added to that file too.
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
kinds=(baseline literal runtime global c-entry)
for kind in "${kinds[@]}"; do
  low=$(instructions "$kind" "$n1")
  high=$(instructions "$kind" "$n2")
  per_append[$kind]=$(awk -v a="$low" -v b="$high" -v n="$((n2 - n1))" 'BEGIN { printf "%.1f", (b - a) / n }')
done
printf '  %-52s %8s instructions\n' \
  "C floor (baseline):" "${per_append[baseline]}" \
  "ring.append, all literals:" "${per_append[literal]}" \
  "ring.append, run-time message and value:" "${per_append[runtime]}" \
  "addBreadcrumb, run-time message and value:" "${per_append[global]}" \
  "C entry crumbs_add_breadcrumb_utf8:" "${per_append[c-entry]}"
awk -v r="${per_append[runtime]}" -v b="${per_append[baseline]}" \
  'BEGIN { printf "run-time append / floor: %.1fx the instructions\n", r / b }'
if [ -n "${BENCH_SUMMARY:-}" ]; then
  printf 'instructions per append (callgrind)|run-time %s, literals %s, floor %s||\n' \
    "${per_append[runtime]}" "${per_append[literal]}" "${per_append[baseline]}" >>"$BENCH_SUMMARY"
fi
if [ -n "${CALLGRIND_KEEP:-}" ]; then
  echo "callgrind outputs kept in $work (callgrind_annotate $work/callgrind.runtime.$n2.out)"
fi
