#!/usr/bin/env bash
# Scripts/figures-crash-handler.sh [RUNS] — the crash handler's two speed figures, from real
# crashes of a release test child (scenario recurse-64: a 1 MiB ring of 4096 × 256-byte slots,
# 64 C frames, then a null store), with the Swift backtracer off:
#   handler   entry to complete marker, as measured inside the handler and stored in the record
#             (goal ≤ 1 ms)
#   install   CrashHandler.install as timed by the child around the call (goal ≤ 2 ms), wall
#             clock and the thread's CPU time (on a shared, loaded machine the wall figure
#             mostly measures waiting for a CPU)
# Prints min / median / max over RUNS crashes (default 21). Builds into .build-crash-release.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-21}"
SCRATCH=.build-crash-release
swift build -c release --scratch-path "$SCRATCH" --product CrumbsTestChild >/dev/null
swift build -c release --scratch-path "$SCRATCH" --product crumbs >/dev/null
bin="$(swift build -c release --scratch-path "$SCRATCH" --show-bin-path)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
handler=()
install=()
install_cpu=()
frames=""
for run in $(seq "$RUNS"); do
  dir="$work/$run"
  out="$(SWIFT_BACKTRACE=enable=no "$bin/CrumbsTestChild" recurse-64 "$dir" 2>/dev/null || true)"
  record="$(sed -n 's/^record //p' <<<"$out")"
  install+=("$(sed -n 's/^install-ns //p' <<<"$out")")
  install_cpu+=("$(sed -n 's/^install-cpu-ns //p' <<<"$out")")
  json="$("$bin/crumbs" crash-record dump "$record" --json)"
  handler+=("$(grep -o '"handler_duration_ns":[0-9]*' <<<"$json" | cut -d: -f2)")
  frames="$(grep -o '"frames":\[[^]]*\]' <<<"$json" | tr -cd ',' | wc -c)"
done
stats() { sort -n | awk '{v[NR]=$1} END {printf "min %.1f µs  median %.1f µs  max %.1f µs\n", v[1]/1000, v[int((NR+1)/2)]/1000, v[NR]/1000}'; }
echo "crash handler, release, 1 MiB ring, $((frames + 1)) frames recorded, $RUNS crashes:"
printf '  handler (signal to complete record): '; printf '%s\n' "${handler[@]}" | stats
printf '  install (CrashHandler.install), wall: '; printf '%s\n' "${install[@]}" | stats
printf '  install, thread CPU time:             '; printf '%s\n' "${install_cpu[@]}" | stats
echo "  (load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs: wall times include preemption)"
