#!/bin/bash
# server-mallocs.sh — mallocs a request of each server variant of Examples/HummingbirdServer,
# counted by a perf uprobe on libc's malloc while wrk sends GET /hello for 3 s (one process a
# variant, after a second of warm-up). A count, not a time: the same on a quiet or a busy
# machine, which throughput on this 2-CPU VM is not (docs/figures.md). Needs root and perf.
# Usage, from the repository root (otel variants need the server built by `make bench-otel`):
#   bash Benchmarks/server-mallocs.sh SERVER VARIANT...
#   bash Benchmarks/server-mallocs.sh Examples/HummingbirdServer/.build-otel/release/HummingbirdServer otel otel-tracer
set -eu
server=$1
shift
libc=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64|libc\.so\.6 .*AArch64/ {print $NF; exit}')
# A probe already defined is used and kept; one this script defines is deleted at the end.
event=$(perf probe -l 2>/dev/null | awk '/:malloc / {print $1; exit}')
if [ -z "$event" ]; then
  perf probe -q -x "$libc" malloc
  event=$(perf probe -l 2>/dev/null | awk '/:malloc / {print $1; exit}')
  [ -n "$event" ] || { echo "server-mallocs: no uprobe on malloc in $libc (perf probe, as root)" >&2; exit 1; }
  trap 'perf probe -q -d "$event"' EXIT
fi
dir=$(mktemp -d /tmp/server-mallocs-XXXXXX)
for variant in "$@"; do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  BENCH_VARIANT=$variant PORT=$port CRUMBS_DIRECTORY=$dir/$variant CRUMBS_OTLP_ENDPOINT=http://127.0.0.1:9 \
    SWIFT_BACKTRACE=enable=no "$server" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 2000); do # the port answering, attempts 5 ms apart, bounded
    (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
    sleep 0.005
  done
  wrk -t1 -c8 -d1s "http://127.0.0.1:$port/hello" >/dev/null
  perf stat -x, -e "$event" -p "$pid" -o "$dir/stat" &
  counter=$!
  answered=$(wrk -t1 -c8 -d3s "http://127.0.0.1:$port/hello" | awk '/requests in/ {print $1}')
  kill -INT "$counter"
  wait "$counter" || true
  mallocs=$(awk -F, '/malloc/ {print $1; exit}' "$dir/stat")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$variant: $answered requests, $mallocs mallocs, $(awk "BEGIN {printf \"%.2f\", $mallocs / $answered}") a request"
done
case "$dir" in /tmp/server-mallocs-*) rm -rf "$dir" ;; esac
