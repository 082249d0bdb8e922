#!/usr/bin/env bash
# check-arm64.sh — the signal path proven on aarch64 from an x86_64 machine (`make check-arm64`,
# run by .ci/run; the Makefile installs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and
# qemu-user-static when missing).
#
#   1. every .c of Sources/CrumbsSignalPath compiles for aarch64 with -Wall -Wextra -Werror and
#      -mbranch-protection=standard (pointer authentication and BTI on, as distributions build);
#   2. with the test hooks (Tests/CrumbsSignalPathTesting) it links into the driver
#      (Tests/Arm64Driver), dynamically against the cross glibc, so libc is a module of its own;
#   3. the driver runs under qemu-aarch64 -cpu max (pointer authentication real: saved return
#      addresses carry a code): every case a process that crashes or records
#      (docs/crash-capture.md#aarch64); its page-size case runs again with 64 KiB pages (-p 65536).
#
# ARM64_OUT=DIR keeps the driver's ELF (arm64-driver) and its unwind case's record
# (unwind.crash) there, for CrashRecordArm64Tests. Not covered: the C++ terminate hook
# (crumbs_terminate.cpp, stood in for: no aarch64 C++ library is installed), the Swift layers
# (no aarch64 Swift SDK here).
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
mkdir "$work/objects" "$work/run"

mapfile -t c_files < <(find "$source_dir" "$testing_dir" -name "*.c" -print | sort)
for file in "${c_files[@]}"; do
  "$cc" "${flags[@]}" "${includes[@]}" -c "$file" -o "$work/objects/$(basename "$file" .c).o"
done
echo "check-arm64: ${#c_files[@]} C files of $source_dir and $testing_dir compile for aarch64 with -Wall -Wextra -Werror -mbranch-protection=standard"

# The driver keeps its frame records and real calls, so each of its frames is a frame to find
# (one of its functions asks for no frame pointer: CFI only).
"$cc" "${flags[@]}" "${includes[@]}" -fno-omit-frame-pointer -fno-optimize-sibling-calls -rdynamic \
  "$driver_dir"/*.c "$work"/objects/*.o -pthread -ldl -o "$work/arm64-driver"

run() { timeout 600 "$qemu" -L "$sysroot" "$@"; }
echo "check-arm64: the driver under $qemu -cpu max ($(run -version | head -1)):"
run -cpu max "$work/arm64-driver" "$work/run"
page_size_case() {
  rm -rf "$work/run64" && mkdir "$work/run64"
  run -cpu max -p 65536 "$work/arm64-driver" "$work/run64" page-size
}
echo "check-arm64: with 64 KiB pages (-p 65536):"
page_size_case

if [ -n "${ARM64_OUT:-}" ]; then
  mkdir -p "$ARM64_OUT"
  cp "$work/arm64-driver" "$work/run/unwind.crash" "$ARM64_OUT/"
fi
