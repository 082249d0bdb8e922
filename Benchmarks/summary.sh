#!/usr/bin/env bash
# summary.sh — the table `make bench` ends with: every headline figure of the run (the lines the
# figures programs and scripts added to BENCH_SUMMARY: figure|value|goal|verdict), with the
# machine's conditions, so one screen says what the run found.
#
# With BENCH_FIGURES naming docs/figures.md (make bench does), the same figures replace the table
# between its `<!-- figures -->` and `<!-- /figures -->` markers, with the date and machine: that
# table is always one run's, as measured. Figures live in that file only, not in the README.
#
# Usage: BENCH_SUMMARY=FILE [BENCH_FIGURES=docs/figures.md] Benchmarks/summary.sh
set -euo pipefail

file=${BENCH_SUMMARY:?BENCH_SUMMARY names the file the figures were added to}
[ -s "$file" ] || { echo "summary.sh: no figures in $file"; exit 1; }
echo ""
echo "== Summary: this run's figures and goals (Benchmarks/README.md) =="
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

[ -n "${BENCH_FIGURES:-}" ] || exit 0
python3 - "$file" "$BENCH_FIGURES" "$(nproc)" "$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$(swift --version 2>/dev/null | grep -o 'Swift version [0-9.]*' | head -1)" <<'PY'
import datetime, sys
summary, figures, cpus, model, load, swift = sys.argv[1:7]
begin, end = "<!-- figures -->", "<!-- /figures -->"
text = open(figures, encoding="utf-8").read()
if begin not in text or end not in text or text.index(begin) > text.index(end):
    sys.exit("summary.sh: %s has no %s … %s block: not written" % (figures, begin, end))
rows = []
for line in open(summary, encoding="utf-8"):
    fields = line.rstrip("\n").split("|")
    if len(fields) != 4:
        continue
    figure, value, goal, verdict = fields
    judged = "" if not goal else goal + ": " + (verdict or "not measurable here")
    rows.append("| %s | %s | %s |" % (figure, value, judged))
table = "\n".join([
    begin,
    "Measured %s by `make bench` on %s CPUs (%s; %s, release builds), load average %s at the end."
    % (datetime.date.today().isoformat(), cpus, model, swift or "Swift", load),
    "Ratios compare figures measured in the same run; written by Benchmarks/summary.sh.",
    "",
    "| what | figure | goal |",
    "|---|---|---|",
] + rows + [end])
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(figures, "w", encoding="utf-8").write(head + table + tail)
print("   written to %s (%d figures)" % (figures, len(rows)))
PY
