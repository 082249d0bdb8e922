#!/bin/sh
# thread-capture.sh — what capturing every thread costs the crash handler (issue 12 item 2):
# the handler's own duration (handler_duration_ns), the capture's part of it (request →
# release, capture_ns) and the whole way from the handler's start to the parent's waitpid
# returning (crash_wall_ns to CLOCK_REALTIME then) for a crash with 1, 10 and 100 other threads blocked (none masked, so
# no thread makes the handler wait for its deadline), the record file's size and install time.
# Not a timed test: figures for docs/figures.md and the report. Usage, from the repository root:
#   sh Benchmarks/thread-capture.sh [ROUNDS] [CHILD]
# CHILD defaults to the release test child `make test` builds (.build-release-child), else the
# debug one. Needs the `crumbs` CLI (swift build --product crumbs).
set -eu
ROUNDS=${1:-9}
BIN=$(swift build --show-bin-path)
CHILD=${2:-}
if [ -z "$CHILD" ]; then
  CHILD=.build-release-child/release/CrumbsTestChild
  [ -x "$CHILD" ] || CHILD=$BIN/CrumbsTestChild
fi
echo "child: $CHILD, $ROUNDS rounds each, load: $(cut -d' ' -f1-3 /proc/loadavg)"
for threads in 0 1 10 100; do
  handler=""; capture=""; install=""; death=""; size=0
  round=0
  while [ "$round" -lt "$ROUNDS" ]; do
    dir=$(mktemp -d)
    # The parent notes CLOCK_REALTIME the moment waitpid returns: with the record's own
    # crash_wall_ns (read as the handler starts) that is the crash's whole way to the death.
    CRUMBS_TEST_THREADS=$threads CRUMBS_TEST_NO_MASKED=1 SWIFT_BACKTRACE=enable=no python3 -c '
import subprocess, sys, time
child = subprocess.Popen(sys.argv[1:], stdout=open(sys.argv[3] + "/out.txt", "w"), stderr=subprocess.DEVNULL)
child.wait()
print(time.time_ns())' "$CHILD" all-threads "$dir" > "$dir/reaped.txt"
    record=$(ls "$dir"/rings/*.crash)
    size=$(stat -c %s "$record")
    json=$("$BIN/crumbs" crash-record dump --json "$record")
    handler="$handler $(echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["handler_duration_ns"])')"
    death="$death $(echo "$json" | python3 -c 'import json,sys; print(int(open(sys.argv[1]).read()) - json.load(sys.stdin)["crash_wall_ns"])' "$dir/reaped.txt")"
    capture="$capture $(echo "$json" | python3 -c 'import json,sys; t=json.load(sys.stdin).get("threads"); print(t["capture_ns"] if t else 0)')"
    install="$install $(sed -n 's/^install-ns //p' "$dir/out.txt")"
    rm -rf "$dir"
    round=$((round + 1))
  done
  median() { echo "$@" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  printf 'other threads %3d: handler median %8s ns, capture median %8s ns, crash → reaped median %8s ns, install median %8s ns, record %s bytes\n' \
    "$threads" "$(median $handler)" "$(median $capture)" "$(median $death)" "$(median $install)" "$size"
done
