#!/bin/bash
# Scripts/figures-debuginfod.sh — the figures of docs/symbolication.md "Three ways a stripped build
# becomes readable": build first (swift build), then run it; BIN= another bin path.
# Same run, alternated: processing one crash the way a next launch does (`crumbs collect`, the
# client's own processor run from outside) for (a) a stripped build whose debug file is in the
# debuginfod cache (DEBUGINFOD_URLS names a port nobody listens on: no network) and (b) the same
# build unstripped. Wall and user seconds per processing.
set -e
BIN=${BIN:-$(swift build --show-bin-path)}
RUNS=${RUNS:-6}
W=$(mktemp -d)
strip -s $BIN/CrumbsTestChild -o $W/app-stripped
cp $BIN/CrumbsTestChild $W/app-full
BID=$(readelf -n $W/app-stripped | awk '/Build ID/{print $3}')
objcopy --only-keep-debug $BIN/CrumbsTestChild $W/app.debug
for i in $(seq 1 $RUNS); do
  mkdir -p $W/s$i/debuginfod/$BID && cp $W/app.debug $W/s$i/debuginfod/$BID/debuginfo
  SWIFT_BACKTRACE=enable=no $W/app-stripped null-deref $W/s$i >/dev/null 2>&1 </dev/null & wait $! 2>/dev/null || true
  SWIFT_BACKTRACE=enable=no $W/app-full null-deref $W/f$i >/dev/null 2>&1 </dev/null & wait $! 2>/dev/null || true
  /usr/bin/time -o $W/ta -f "%e s wall, %U s user" env DEBUGINFOD_URLS=http://127.0.0.1:9 $BIN/crumbs collect --otlp http://127.0.0.1:9 --dir $W/s$i >/dev/null 2>&1 || true
  /usr/bin/time -o $W/tb -f "%e s wall, %U s user" $BIN/crumbs collect --otlp http://127.0.0.1:9 --dir $W/f$i >/dev/null 2>&1 || true
  a=$(tail -1 $W/ta); b=$(tail -1 $W/tb)
  echo "run $i: cached debug file: $a | unstripped binary: $b"
done
for d in s1 f1; do
  printf "%s: " $d; $BIN/crumbs reports show $($BIN/crumbs reports list --dir $W/$d --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["report.id"])') --dir $W/$d | grep -m1 -o "crumbs_test_null_deref[^ ]*.*" || echo "NOT NAMED"
done
case "$W" in /tmp/tmp.*) rm -rf "$W";; esac
