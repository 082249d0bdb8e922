#!/bin/sh
# hang-soak.sh — no false hang in a saturated, healthy process (issue 23): the test child's
# hang-saturated scenario (two threads spinning and beating a heartbeat, a stream of short pool
# tasks: both CPUs busy; threshold 1 s, a check every second) for CHECKS watchdog checks
# (default 600: ten minutes), then the hang reports it stored (the goal: 0). Not a timed test:
# a figure for the note and docs/figures.md. Usage, from the repository root:
#   sh Benchmarks/hang-soak.sh [CHECKS] [CHILD]
set -eu
CHECKS=${1:-600}
CHILD=${2:-}
if [ -z "$CHILD" ]; then
  CHILD=.build-release-child/release/CrumbsTestChild
  [ -x "$CHILD" ] || CHILD=$(swift build --show-bin-path)/CrumbsTestChild
fi
dir=$(mktemp -d)
start=$(date +%s)
echo "child: $CHILD, $CHECKS checks, load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$CHILD" hang-saturated "$dir/crumbs" "$CHECKS"
echo "seconds: $(( $(date +%s) - start )), load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
case "$dir" in /tmp/*) rm -rf "$dir" ;; esac
