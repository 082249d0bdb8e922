#!/usr/bin/env bash
# Scripts/figures-crash-loop.sh [LAUNCHES] [MAX_RECORDS] [MAX_MB] [DIR] — a crash loop, and what
# it leaves on disk. The test child (scenario client-crash-at-once; debug, or CONFIG=release)
# starts a CrumbsClient with no destination and the given store limits
# (database.maxRecordCount, maxDatabaseSize in MB) and dereferences null at once: no launch lives
# long enough for its background work. It runs LAUNCHES times (default 300; limits default 20
# reports, 1 MB) into DIR (default: a fresh temporary directory, removed afterwards), then prints
# how long CrumbsClient.start took on the launch's thread (it processes the oldest waiting
# sessions briefly when more than a few wait), and the files and bytes under DIR, in all and per
# folder. Bytes are file sizes (`find -printf %s`); rings are fully allocated, so this is also
# what they take on disk.
set -euo pipefail
cd "$(dirname "$0")/.."
LAUNCHES="${1:-300}"
RECORDS="${2:-20}"
MEGABYTES="${3:-1}"
CONFIG="${CONFIG:-debug}"  # CONFIG=release: a release child, built into .build-release-child (as make test does)
if [ "$CONFIG" = release ]; then
  swift build -c release --scratch-path .build-release-child --product CrumbsTestChild >/dev/null
  child="$(swift build -c release --scratch-path .build-release-child --show-bin-path)/CrumbsTestChild"
else
  swift build --product CrumbsTestChild >/dev/null
  child="$(swift build --show-bin-path)/CrumbsTestChild"
fi
if [ -n "${4:-}" ]; then
  dir="$4"
  mkdir -p "$dir"
else
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' EXIT
fi
start=$(date +%s.%N)
crashed=0
times="$(mktemp)"
for _ in $(seq "$LAUNCHES"); do
  status=0
  # In a group with stderr closed: bash's own "Segmentation fault" line goes there too.
  { SWIFT_BACKTRACE=enable=no "$child" client-crash-at-once "$dir" "$RECORDS" "$MEGABYTES" >>"$times"; } 2>/dev/null \
    || status=$?
  [ "$status" -eq 139 ] && crashed=$((crashed + 1))
done
end=$(date +%s.%N)
printf '%d launches (%d died by SIGSEGV) in %s s, limits %s reports / %s MB, into %s\n' \
  "$LAUNCHES" "$crashed" "$(awk "BEGIN { printf \"%.1f\", $end - $start }")" "$RECORDS" "$MEGABYTES" "$dir"
spread() { sort -n | awk '{ v[NR] = $1 } END { printf "min %.2f ms, median %.2f ms, max %.2f ms", v[1], v[int((NR + 1) / 2)], v[NR] }'; }
echo "CrumbsClient.start on the launch's thread, wall clock: $(awk '/^start-ms/ { print $2 }' "$times" | spread)"
echo "CrumbsClient.start on the launch's thread, CPU time:   $(awk '/^start-ms/ { print $4 }' "$times" | spread)"
rm -f "$times"
total() { find "$1" -type f -printf '%s\n' 2>/dev/null | awk '{ n++; b += $1 } END { printf "%6d files %12d bytes", n, b }'; }
printf '%-28s %s\n' "all" "$(total "$dir")"
for folder in rings quarantine session-summaries reports reports/pending reports/sent reports/dropped \
  reports/quarantine reports/.incoming; do
  [ -d "$dir/$folder" ] && printf '%-28s %s\n' "$folder/" "$(total "$dir/$folder")"
done
