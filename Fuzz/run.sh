#!/usr/bin/env bash
# Fuzz/run.sh SECONDS — build every fuzz target with libFuzzer + AddressSanitizer and run each for
# SECONDS seconds on a work copy of its corpus. Called by `make fuzz FUZZ_SECONDS=N`.
#
# On a crash: the input is copied into Fuzz/Regressions/<corpus>/ under a descriptive name
# (what libFuzzer saw + where + a hash), printed, and the script exits non-zero. Commit that file:
# Tests/CrumbsFuzzRegressionTests/FuzzRegressionTests.swift replays it on every `make test`.
#
# Environment: FUZZ_CONFIG=release|debug (default release), FUZZ_JOBS (parallel workers per
# target, default 1), FUZZ_ARGS (extra libFuzzer flags), FUZZ_TARGETS (names to run, default all).
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET="${1:-60}"
CONFIG="${FUZZ_CONFIG:-release}"
JOBS="${FUZZ_JOBS:-1}"
SCRATCH=.build-fuzz

# One line per target: <product> <corpus directory under Fuzz/Corpus and Fuzz/Regressions>.
TARGETS=(
  "FuzzRingReader ring-reader"
  "FuzzCrashRecordReader crashrecord-reader"
  "FuzzELFReader elf-reader"
  "FuzzCFIReader cfi-reader"
  "FuzzELFSymbol elf-symbol"
  "FuzzStoredReport stored-report"
  "FuzzHTTPHeaders http-headers"
  "FuzzHTTPResponse http-response"
  "FuzzTrailEntries trail-entries"
  "FuzzThreadDump thread-dump"
  "FuzzCrashLoopTally loop-tally"
  "FuzzSessionFile session-file"
  "FuzzSourceLines source-lines"
)

export SWIFT_BACKTRACE=enable=no # its memory reader confuses ASan (docs/platform-facts.md)
SYMBOLIZER="$(dirname "$(command -v swift)")/llvm-symbolizer"
[ -x "$SYMBOLIZER" ] && export ASAN_SYMBOLIZER_PATH="$SYMBOLIZER"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}"

failed=0
for entry in "${TARGETS[@]}"; do
  read -r product corpus <<<"$entry"
  if [ -n "${FUZZ_TARGETS:-}" ] && [[ " $FUZZ_TARGETS " != *" $product "* ]]; then continue; fi

  echo "== $product: building ($CONFIG, -sanitize=fuzzer,address)"
  build=(swift build --scratch-path "$SCRATCH" -c "$CONFIG" --product "$product"
    -Xswiftc -sanitize=fuzzer,address)
  # A parser written in C (the crash handler's CFI reader and symbol lookup) needs the C code
  # instrumented too: coverage for libFuzzer and AddressSanitizer's checks on its reads. Its own
  # scratch path, so the other targets keep their build.
  if [ "$product" = FuzzCFIReader ] || [ "$product" = FuzzELFSymbol ]; then
    build=(swift build --scratch-path "$SCRATCH-c" -c "$CONFIG" --product "$product"
      -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=fuzzer-no-link,address
      -Xcxx -fsanitize=fuzzer-no-link,address)
  fi
  if ! "${build[@]}"; then
    echo "fuzz: $product did not build" >&2
    exit 2
  fi
  binary="$("${build[@]}" --show-bin-path)/$product"

  work="Fuzz/corpus-work/$corpus"
  artifacts="Fuzz/corpus-work/$corpus-artifacts"
  mkdir -p "$work" "$artifacts" "Fuzz/Regressions/$corpus"
  # The committed seeds and regressions start the work corpus; what earlier runs found stays.
  cp -n Fuzz/Corpus/"$corpus"/* "$work"/ 2>/dev/null || true
  find "Fuzz/Regressions/$corpus" -type f ! -name 'README*' -exec cp -n {} "$work"/ \; 2>/dev/null
  rm -f "$artifacts"/*
  log="Fuzz/corpus-work/$corpus.log"

  echo "== $product: fuzzing for ${SECONDS_PER_TARGET}s ($JOBS job(s)), log $log"
  if [ "$JOBS" -gt 1 ]; then
    parallel=(-fork="$JOBS" -ignore_crashes=0)
  else
    parallel=()
  fi
  # shellcheck disable=SC2086
  "$binary" "$work" -max_total_time="$SECONDS_PER_TARGET" -artifact_prefix="$artifacts/" \
    -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 "${parallel[@]}" ${FUZZ_ARGS:-} \
    >"$log" 2>&1
  status=$?
  grep -E '^(stat::|Done|INFO: fuzzed|#[0-9]+ +DONE)' "$log" | tail -5

  shopt -s nullglob
  found=("$artifacts"/crash-* "$artifacts"/timeout-* "$artifacts"/oom-* "$artifacts"/leak-*)
  shopt -u nullglob
  if [ "$status" -eq 0 ] && [ "${#found[@]}" -eq 0 ]; then
    echo "== $product: no crash"
    continue
  fi

  failed=1
  echo "== $product: libFuzzer exited $status; last lines of $log:" >&2
  grep -E 'ERROR|SUMMARY|deadly signal|Fatal error|#[0-9] 0x' "$log" | head -20 >&2
  # What and where, for the file name: the sanitizer's verdict (or libFuzzer's), and the first
  # stack frame in our code.
  kind=""
  for pattern in 'Swift runtime failure: [a-zA-Z -]+' 'Fatal error' 'AddressSanitizer: [a-z-]+' \
    'deadly signal|timeout|out-of-memory|leak'; do
    kind="$(grep -oE "$pattern" "$log" | head -1 |
      sed -E 's/(Swift runtime failure|AddressSanitizer): //; s/ +$//; s/ /-/g' | tr 'A-Z' 'a-z')"
    [ -n "$kind" ] && break
  done
  frames="$(grep -E '^ +#[0-9]+ 0x' "$log" | grep -vE 'fuzzer::|__sanitizer|__asan|libc\.so|libswiftCore')"
  frame="$({ grep '/Sources/' <<<"$frames"; cat <<<"$frames"; } | grep ' in ' |
    head -1 | sed -E 's/.* in ([^ ]+).*/\1/' | swift demangle --simplified 2>/dev/null |
    sed -E 's/^((specialized|static|merged|partial apply for|closure #[0-9]+ in) )*//; s/[( <].*//; s/[^A-Za-z0-9_.]/-/g' |
    cut -c1-60)"
  for input in "${found[@]}"; do
    hash="$(sha1sum "$input" | cut -c1-10)"
    name="${kind:-crash}${frame:+-$frame}-$hash"
    destination="Fuzz/Regressions/$corpus/$name"
    cp "$input" "$destination"
    echo "fuzz: $product found an input that fails: $destination ($(wc -c <"$input") bytes)" >&2
    od -A d -t x1 "$destination" | head -8 >&2
    echo "  replay: $binary $destination   (or a normal build: .build/debug/$product $destination)" >&2
  done
done

if [ "$failed" -ne 0 ]; then
  echo "fuzz: FAILED — commit the new file(s) in Fuzz/Regressions/, fix the parser, re-run make test" >&2
  exit 1
fi
echo "fuzz: all targets ran ${SECONDS_PER_TARGET}s without a crash"
