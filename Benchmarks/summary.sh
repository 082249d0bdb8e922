#!/usr/bin/env bash
# summary.sh — the table `make bench` ends with: every headline figure of the run (the lines the
# figures programs and scripts added to BENCH_SUMMARY: figure|value|goal|verdict), with the
# machine's conditions, so one screen says what the run found.
#
# Usage: BENCH_SUMMARY=FILE Benchmarks/summary.sh
set -euo pipefail

file=${BENCH_SUMMARY:?BENCH_SUMMARY names the file the figures were added to}
[ -s "$file" ] || { echo "summary.sh: no figures in $file"; exit 1; }
echo ""
echo "== Summary: this run's figures and goals (issue 14) =="
echo "   machine: $(nproc) CPUs, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo); load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo "   ratios compare figures measured in the same run (the floor, the ring-only process): they hold on a busy machine better than the absolute times"
# Widths in characters, not bytes (the figures use →, × and ≤): continuation bytes uncounted.
LC_ALL=C awk -F'|' '
  function width(text,   copy) { copy = text; return length(text) - gsub(/[\200-\277]/, "", copy) }
  function pad(text, to) { return text sprintf("%" (to - width(text) + 1) "s", "") }
  { figure[NR] = $1; value[NR] = $2; goal[NR] = $3; verdict[NR] = $4
    if (width($1) > wf) wf = width($1); if (width($2) > wv) wv = width($2) }
  END {
    for (i = 1; i <= NR; i++) {
      line = "   " pad(figure[i], wf) " " pad(value[i], wv)
      if (goal[i] != "") line = line " goal " goal[i] ": " (verdict[i] == "" ? "not measurable here" : verdict[i])
      print line
    }
  }' "$file"
