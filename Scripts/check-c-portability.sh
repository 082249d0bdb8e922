#!/usr/bin/env bash
# check-c-portability.sh — keeps the signal path (Sources/CrumbsSignalPath) honest beyond the
# dynamic glibc build that `swift build` makes here (issue 21, case 14). Run by `make test`.
#
#   1. every .c compiles with -Wall -Wextra -Werror under gcc, the Swift toolchain's clang and
#      musl-gcc (Debian's musl-tools: the libc of the Static Linux SDK), the .cpp under clang++
#      (g++ rejects the C11 _Static_assert of the shared C header in C++; SwiftPM uses clang++);
#   2. the musl objects link statically into Scripts/c-portability-smoke.c, so a glibc-only
#      symbol fails here rather than in someone's Static Linux SDK build, and the program runs:
#      a thread created after install runs on an alternate stack, a forked child's crash is
#      recorded;
#   3. the same program linked statically against glibc (as `swiftc -static-executable` links),
#      which also checks that signal() after siginterrupt() lets an alarm interrupt a read.
#
# What this does not cover: running under the Static Linux SDK itself (its musl and libc++ are
# not on these machines), aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."

source_dir=Sources/CrumbsSignalPath
smoke=Scripts/c-portability-smoke.c
warnings=(-O2 -Wall -Wextra -Werror)
includes=(-I"$source_dir/include" -I"$source_dir")
# Every C and C++ file of the target, in its room folders (the test hooks are not the product).
mapfile -t c_files < <(find "$source_dir" -name "*.c" -print | sort)
mapfile -t cpp_files < <(find "$source_dir" -name "*.cpp" -print | sort)

clang=clang
if command -v swift >/dev/null 2>&1; then
  toolchain_clang="$(dirname "$(readlink -f "$(command -v swift)")")/clang"
  [ -x "$toolchain_clang" ] && clang="$toolchain_clang"
fi
for tool in gcc musl-gcc "$clang" "$clang++"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "check-c-portability: $tool not found (make test-deps installs musl-tools)" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/gcc" "$work/clang" "$work/musl"

for file in "${c_files[@]}"; do
  name="$(basename "$file" .c)"
  gcc "${warnings[@]}" "${includes[@]}" -c "$file" -o "$work/gcc/$name.o"
  "$clang" "${warnings[@]}" "${includes[@]}" -c "$file" -o "$work/clang/$name.o"
  musl-gcc "${warnings[@]}" "${includes[@]}" -c "$file" -o "$work/musl/$name.o"
done
for file in "${cpp_files[@]}"; do
  "$clang++" "${warnings[@]}" "${includes[@]}" -c "$file" -o "$work/gcc/$(basename "$file" .cpp).o"
done
echo "check-c-portability: $source_dir compiles with -Wall -Wextra -Werror under gcc, $(basename "$clang") and musl-gcc"

musl-gcc "${warnings[@]}" "${includes[@]}" -static "$smoke" "$work"/musl/*.o -o "$work/smoke-musl"
echo "check-c-portability: static musl program (every musl object linked):"
timeout 60 "$work/smoke-musl"

# glibc warns that getpwnam and dlopen in a static program need the shared libc at run time.
gcc "${warnings[@]}" "${includes[@]}" -DCRUMBS_SMOKE_WITH_CXX -static "$smoke" "$work"/gcc/*.o \
  -lstdc++ -o "$work/smoke-glibc" 2> >(grep -v 'statically linked applications requires' >&2)
echo "check-c-portability: static glibc program:"
timeout 60 "$work/smoke-glibc"
