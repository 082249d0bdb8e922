#!/usr/bin/env bash
# check-arm64.sh — the signal path proven on aarch64 from an x86_64 machine (`make check-arm64`,
# run by .ci/run; the Makefile installs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and
# qemu-user-static when missing).
#
#   1. every .c of Sources/CrumbsSignalPath compiles for aarch64 with -Wall -Wextra -Werror and
#      -mbranch-protection=standard (pointer authentication and BTI on, as distributions build),
#      by gcc and by the Swift toolchain's clang (what SwiftPM builds it with);
#   2. with the test hooks (Tests/CrumbsSignalPathTesting) it links into the driver
#      (Tests/Arm64Driver), dynamically against the cross glibc, so libc is a module of its own;
#   3. the driver runs under qemu-aarch64 -cpu max (pointer authentication real: saved return
#      addresses carry a code): every case a process that crashes or records
#      (docs/crash-capture.md#aarch64); then again with 64 KiB pages (-p 65536), and again with
#      clang's objects.
#
# ARM64_OUT=DIR builds the driver there (DIR/arm64-driver) and leaves each case's files in
# DIR/run, so a record's module paths name files that exist (CrashRecordArm64Tests reads the
# unwind case's); ARM64_CASES="unwind …" runs only those cases with gcc's objects, nothing else.
# Not covered: the C++ terminate hook (crumbs_terminate.cpp, stood in for: no aarch64 C++
# library is installed), the Swift layers (no aarch64 Swift SDK here).
set -euo pipefail
cd "$(dirname "$0")/.."

cc=aarch64-linux-gnu-gcc
qemu=qemu-aarch64-static
sysroot=/usr/aarch64-linux-gnu
for tool in "$cc" "$qemu"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "check-arm64: $tool not found (make check-arm64 installs it)" >&2; exit 1; }
done

source_dir=Sources/CrumbsSignalPath
testing_dir=Tests/CrumbsSignalPathTesting
driver_dir=Tests/Arm64Driver
flags=(-O2 -g -Wall -Wextra -Werror -mbranch-protection=standard)
includes=(-I"$source_dir/include" -I"$source_dir" -I"$testing_dir/include" -I"$testing_dir")

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="${ARM64_OUT:-$work}"
rm -rf "$out/run" && mkdir -p "$out/run"

mapfile -t c_files < <(find "$source_dir" "$testing_dir" -name "*.c" -print | sort)
# qemu-user writes a guest core file into the working directory for every crash it lets
# through when core dumps are allowed: none here (the cases crash on purpose).
ulimit -c 0
run() { timeout 600 "$qemu" -L "$sysroot" "$@"; }

# Compiles the signal path and the hooks with compiler "$@" into $work/objects-$label, links
# them with the driver (always gcc: it asks gcc for one frame without a frame pointer, and keeps
# its frame records and real calls, so each of its frames is one to find) into $out/$label.
build() {
  local label=$1
  shift
  mkdir -p "$work/objects-$label"
  for file in "${c_files[@]}"; do
    "$@" "${flags[@]}" "${includes[@]}" -c "$file" -o "$work/objects-$label/$(basename "$file" .c).o"
  done
  echo "check-arm64: ${#c_files[@]} C files of $source_dir and $testing_dir compile for aarch64 with $(basename "$1") -Wall -Wextra -Werror -mbranch-protection=standard"
  local driver=(-fno-omit-frame-pointer -fno-optimize-sibling-calls)
  mkdir -p "$work/driver"
  for file in "$driver_dir"/*.c; do
    local extra=()
    # Frame records without call frame information: code built without unwind tables.
    [[ $file == *_records.c ]] && extra=(-fno-asynchronous-unwind-tables -fno-unwind-tables)
    "$cc" "${flags[@]}" "${includes[@]}" "${driver[@]}" "${extra[@]}" -c "$file" \
      -o "$work/driver/$(basename "$file" .c).o"
  done
  "$cc" -rdynamic "$work/driver"/*.o "$work/objects-$label"/*.o -pthread -ldl -o "$out/$label"
}

build arm64-driver "$cc"
echo "check-arm64: the driver under $qemu -cpu max ($(run -version | head -1)):"
# shellcheck disable=SC2086 # ARM64_CASES is a list of case names
run -cpu max "$out/arm64-driver" "$out/run" ${ARM64_CASES:-}
[ -n "${ARM64_CASES:-}" ] && exit 0
# Every case again with 64 KiB pages but two the emulator cannot run with pages larger than the
# host's 4 KiB: sigbus (it cannot map a file's page past its end: mmap fails) and live-capture
# (its /proc/self/maps then has no [stack] line, so glibc's pthread_getattr_np finds no stack
# for the main thread). A kernel does both.
echo "check-arm64: with 64 KiB pages (-p 65536):"
mkdir "$work/run64"
run -cpu max -p 65536 "$out/arm64-driver" "$work/run64" ring segv-null segv-wild bad-call sigill sigtrap \
  sigabrt divide-by-zero esr-record unwind frame-records signal-handler stack-overflow threads fork \
  page-size

# SwiftPM builds the signal path with the toolchain's clang: the same cases with its objects.
clang=""
if command -v swift >/dev/null 2>&1; then
  clang="$(dirname "$(readlink -f "$(command -v swift)")")/clang"
fi
if [ -x "$clang" ]; then
  build arm64-driver-clang "$clang" --target=aarch64-linux-gnu
  echo "check-arm64: the driver with the signal path built by clang:"
  mkdir "$work/run-clang"
  run -cpu max "$out/arm64-driver-clang" "$work/run-clang"
else
  echo "check-arm64: no Swift toolchain clang: the signal path was built by gcc only"
fi
