# Crumbs — the two commands a newcomer needs are `make demo` and `make test`.
# Both install what is missing (Debian's liblz4-dev, zlib1g-dev and pkg-config, with sudo when not root;
# `make test` also musl-tools and python3-pip), then build. Everything else here is for developers.

SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
FUZZ_SECONDS ?= 60
DEMO_DIR ?= $(CURDIR)/crumbs-demo
DEMO_ARGS ?=

.PHONY: demo test tsan deps test-deps check-c check-arm64 arm64-deps check-arrows check-docs check-rooms werror build bench bench-server bench-otel fuzz format lint clean

deps:
	@if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists liblz4 || [ ! -f /usr/include/lz4frame.h ] \
	  || ! pkg-config --exists zlib || [ ! -f /usr/include/zlib.h ]; then \
	  echo "Installing liblz4-dev, zlib1g-dev and pkg-config (apt-get)…"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liblz4-dev lz4 zlib1g-dev pkg-config >/dev/null; \
	fi
	@command -v $(SWIFT) >/dev/null 2>&1 || { echo "Swift 6 toolchain not found: install it from swift.org first" >&2; exit 1; }

build: deps
	$(SWIFT) build

## The tests start their own debuginfod servers: a machine's own (Debian's profile script sets
## DEBUGINFOD_URLS when asked to) would be asked by every `crumbs collect` they run.
TEST_ENV = env -u DEBUGINFOD_URLS -u DEBUGINFOD_CACHE_PATH

## The main job: a child crashes end to end, and its report is printed.
demo: deps
	$(SWIFT) build --product crumbs
	$$($(SWIFT) build --show-bin-path)/crumbs demo --dir "$(DEMO_DIR)" $(DEMO_ARGS)

## Every test: unit, stress, crash and kill -9 children, fuzz regressions. The crash tests also
## run a release build of the test child (CRUMBS_RELEASE_CHILD), built into its own scratch path,
## beside a release `crumbs` whose symbols must name no test code (Scripts/check-no-test-code.sh).
## The delivery tests decode what was sent with the official OTLP decoder (PyPI opentelemetry-proto).
## check-c compiles the signal path with -Werror under gcc, clang and musl-gcc (Debian's musl-tools).
## The debuginfod tests start Debian's real `debuginfod` (elfutils) on loopback.
test-deps:
	@if ! command -v musl-gcc >/dev/null 2>&1; then \
	  echo "Installing musl-tools (apt-get) for the signal path's musl check…"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null; \
	fi
	@if ! command -v debuginfod >/dev/null 2>&1 || ! command -v eu-readelf >/dev/null 2>&1; then \
	  echo "Installing debuginfod and elfutils (apt-get) for the debuginfod tests' real server…"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debuginfod elfutils >/dev/null; \
	fi
	@if ! python3 -m pip --version >/dev/null 2>&1; then \
	  echo "Installing python3-pip (apt-get) for the tests' OTLP decoder…"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null; \
	fi
	@python3 -c 'import opentelemetry.proto' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check opentelemetry-proto \
	  || python3 -m pip install -q --disable-pip-version-check --break-system-packages opentelemetry-proto

test: deps test-deps check-c check-arrows check-docs check-rooms
	$(SWIFT) build --build-tests
	$(SWIFT) build -c release --product CrumbsTestChild --scratch-path .build-release-child
	$(SWIFT) build -c release --product crumbs --scratch-path .build-release-child
	./Scripts/check-no-test-code.sh $$($(SWIFT) build -c release --scratch-path .build-release-child --show-bin-path)/crumbs
	CRUMBS_RELEASE_CHILD=$$($(SWIFT) build -c release --scratch-path .build-release-child --show-bin-path)/CrumbsTestChild \
	  $(TEST_ENV) $(SWIFT) test --skip-build

## The recorder and delivery tests under the thread sanitizer, built into .build-tsan: the test
## bundle and the `crumbs` CLI they run; not the fuzz targets nor the test child, 16 links that
## `--build-tests` would add for nothing. 2 to 5 minutes from nothing on 2 busy CPUs, seconds
## after; the tests take 1 to 2 minutes. Any report fails it: each process writes its reports to
## a file under .build-tsan/reports (the test process and the `crumbs` CLI, both instrumented),
## and a file there is printed and fails the run. The children the tests crash are the ordinary
## debug and release builds (CRUMBS_TEST_CHILD, CRUMBS_RELEASE_CHILD): built with the sanitizer,
## the test child dies before `main` (it replaces malloc, which the sanitizer's runtime owns).
## ConsumerPackageTests are skipped: they build and run packages of their own, none of it
## instrumented. Reports that are no bug: .ci/tsan-suppressions.txt, each with its reason
## (docs/testing.md, "The thread-sanitizer run").
TSAN_REPORTS = $(CURDIR)/.build-tsan/reports
tsan: deps test-deps
	$(SWIFT) build --product CrumbsTestChild
	$(SWIFT) build -c release --product CrumbsTestChild --scratch-path .build-release-child
	$(SWIFT) build --product CrumbsPackageTests --sanitize=thread --scratch-path .build-tsan
	$(SWIFT) build --product crumbs --sanitize=thread --scratch-path .build-tsan
	rm -rf "$(TSAN_REPORTS)" && mkdir -p "$(TSAN_REPORTS)"
	@status=0; \
	  CRUMBS_TEST_CHILD=$$($(SWIFT) build --show-bin-path)/CrumbsTestChild \
	  CRUMBS_RELEASE_CHILD=$$($(SWIFT) build -c release --scratch-path .build-release-child --show-bin-path)/CrumbsTestChild \
	  TSAN_OPTIONS="suppressions=$(CURDIR)/.ci/tsan-suppressions.txt:log_path=$(TSAN_REPORTS)/report:print_suppressions=0" \
	  $(TEST_ENV) $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan \
	    --filter 'CrumbsRecorderTests|CrumbsDeliveryTests' --skip ConsumerPackageTests || status=$$?; \
	  if [ -n "$$(ls -A "$(TSAN_REPORTS)")" ]; then \
	    cat "$(TSAN_REPORTS)"/*; echo "tsan: thread-sanitizer reports in $(TSAN_REPORTS) (above)" >&2; exit 1; \
	  fi; \
	  exit $$status

## The arrows test and fuzz targets keep: CrumbsRecorderTests and what it links never reach
## Crumbs, CrumbsReports or CrumbsDelivery; each fuzz target links only the module it fuzzes
## (Scripts/check-dependency-closure.py walks `swift package dump-package`: seconds, no build).
check-arrows:
	SWIFT=$(SWIFT) ./Scripts/check-dependency-closure.py

## The signal path's rooms (docs/crash-capture.md): every file in a room folder, every include in
## the room's direction, no test header in the product, top comments of at most 20 lines, no C
## file over 600 lines (Scripts/check-signal-path-rooms.py); no
## circle in the calls between its files and at most 10 floors of them
## (Scripts/signal-path-calls.py compiles each file and reads its symbols: seconds).
check-rooms:
	./Scripts/check-signal-path-rooms.py
	./Scripts/signal-path-calls.py

## Every link to a document of the repository, and its anchor, resolves: README.md, docs/,
## Benchmarks/ and Fuzz/ Markdown, and docs/…md#anchor named in Sources/ and Tests/
## (Scripts/check-doc-links.py: seconds, no build).
check-docs:
	./Scripts/check-doc-links.py

## The signal path compiled with -Wall -Wextra -Werror by gcc, clang and musl-gcc, and linked
## statically against musl and glibc into a program that runs it (Scripts/check-c-portability.sh).
check-c: test-deps
	./Scripts/check-c-portability.sh

## The signal path proven on aarch64 (Scripts/check-arm64.sh): compiled for it with -Wall -Wextra
## -Werror -mbranch-protection=standard by Debian's cross compiler and the toolchain's clang,
## linked with the test hooks into Tests/Arm64Driver, and run under qemu-aarch64 -cpu max
## (pointer authentication real): every crash signal, unwinding through signed return addresses,
## libc and a leaf, a stack overflow, every thread, fork, the ring; 64 KiB pages too. One to two
## minutes once installed.
arm64-deps:
	@if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || [ ! -f /usr/aarch64-linux-gnu/include/stdio.h ] \
	  || ! command -v qemu-aarch64-static >/dev/null 2>&1; then \
	  echo "Installing gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user-static (apt-get)…"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static >/dev/null; \
	fi

check-arm64: arm64-deps
	./Scripts/check-arm64.sh

## Every C target of the package (the signal path, the libcurl loader, the test and fuzz C
## helpers: whatever `swift package describe` lists as C) built by SwiftPM's own clang with
## -Wall -Wextra -Werror, into its own scratch path (.build-werror). A build flag, as CI passes
## it, not unsafeFlags in the manifest, which would stop the package being a dependency. Only
## the C targets: -Xcc also reaches the clang importer of every Swift module, so a full build
## would rebuild them all for nothing. -Werror comes first: SwiftPM 6.3 stops with an internal
## error ("Unexpected '-Wwarning' or '-Werror' at the end of args") when it is the last flag.
werror: deps
	@targets=$$($(SWIFT) package describe --type json | python3 -c 'import json, sys; \
	  print(" ".join(t["name"] for t in json.load(sys.stdin)["targets"] if t.get("module_type") == "ClangTarget"))') && \
	  [ -n "$$targets" ] && for target in $$targets; do \
	    echo "werror: $$target"; \
	    $(SWIFT) build --scratch-path .build-werror --target $$target -Xcc -Werror -Xcc -Wall -Xcc -Wextra || exit 1; \
	  done

## Speed goals, each ratio against a baseline measured in the same run (see Benchmarks/README.md),
## in one run: the ordo-one suite (ns per append, mallocs), instructions per append (callgrind),
## the append figures (C floor, literals and run-time values, 1 and 2 threads, mallocs), machine
## code per call site, the process figures (start, RSS, fault → death and exit against a
## recorder-only process), the crash path, a live thread capture of 100 threads (each thread's
## pause, a request loop's latency during captures), hang detection's costs (heartbeat.beat()
## against a relaxed store, the watchdog idle), the collector, a Hummingbird server with and
## without Crumbs (bench-server); then one summary table of every
## figure and goal, which also replaces the table in docs/figures.md. valgrind is installed when
## missing. About 6 to 12 minutes on 2 CPUs once built.
BENCH_SUMMARY = $(CURDIR)/Benchmarks/.build/bench-summary.txt
bench: deps
	@command -v valgrind >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
	# Without the build manifest cache: a cached one misses source files added to this package
	# (the benchmarks' path dependency) since the last build, and the build then fails.
	cd Benchmarks && $(SWIFT) build -c release --disable-build-manifest-caching
	@mkdir -p Benchmarks/.build && rm -f $(BENCH_SUMMARY)
	cd Benchmarks && $(SWIFT) package --allow-writing-to-package-directory benchmark --scale
	cd Benchmarks && BENCH_SUMMARY=$(BENCH_SUMMARY) ./callgrind.sh
	cd Benchmarks && bin=$$($(SWIFT) build -c release --show-bin-path) && \
	  BENCH_SUMMARY=$(BENCH_SUMMARY) LD_PRELOAD=$$bin/libMallocInterposerSwift.so $$bin/RingAppendFigures
	cd Benchmarks && BENCH_SUMMARY=$(BENCH_SUMMARY) ./callsites.sh
	cd Benchmarks && BENCH_SUMMARY=$(BENCH_SUMMARY) $$($(SWIFT) build -c release --show-bin-path)/ProcessFigures
	cd Benchmarks && BENCH_SUMMARY=$(BENCH_SUMMARY) $$($(SWIFT) build -c release --show-bin-path)/ReportFigures
	cd Benchmarks && BENCH_SUMMARY=$(BENCH_SUMMARY) $$($(SWIFT) build -c release --show-bin-path)/LiveCaptureFigures
	cd Benchmarks && bin=$$($(SWIFT) build -c release --show-bin-path) && \
	  BENCH_SUMMARY=$(BENCH_SUMMARY) LD_PRELOAD=$$bin/libMallocInterposerSwift.so $$bin/HangFigures
	cd Benchmarks && BENCH_SUMMARY=$(BENCH_SUMMARY) $$($(SWIFT) build -c release --show-bin-path)/PoolLookFigures
	cd Benchmarks && bin=$$($(SWIFT) build -c release --show-bin-path) && \
	  BENCH_SUMMARY=$(BENCH_SUMMARY) LD_PRELOAD=$$bin/libMallocInterposerSwift.so $$bin/LedgerFigures
	cd Benchmarks && bin=$$($(SWIFT) build -c release --show-bin-path) && \
	  BENCH_SUMMARY=$(BENCH_SUMMARY) LD_PRELOAD=$$bin/libMallocInterposerSwift.so $$bin/TracerFigures
	$(SWIFT) build -c release --product crumbs
	$(SWIFT) build -c release --product CrumbsTestChild --scratch-path .build-release-child
	BENCH_SUMMARY=$(BENCH_SUMMARY) sh Benchmarks/collector-soak.sh 0.5 $$($(SWIFT) build -c release --show-bin-path)/crumbs \
	  $$($(SWIFT) build -c release --scratch-path .build-release-child --show-bin-path)/CrumbsTestChild
	$(MAKE) bench-server SERVER_BENCH_SUMMARY=$(BENCH_SUMMARY)
	@BENCH_SUMMARY=$(BENCH_SUMMARY) BENCH_FIGURES=$(CURDIR)/docs/figures.md Benchmarks/summary.sh

## A real Hummingbird 2 server (Examples/HummingbirdServer) with and without Crumbs, variants
## alternated: start → first response with a crash to process, RSS once the report is delivered,
## wrk's throughput and p99 (Benchmarks/server-bench.py). wrk is installed when missing. About
## a minute once built (the first build of Hummingbird takes minutes). `make bench` runs it and
## adds its figures to the summary.
SERVER_BENCH_SUMMARY =
bench-server:
	@command -v wrk >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	cd Examples/HummingbirdServer && $(SWIFT) build -c release --product HummingbirdServer --disable-build-manifest-caching
	BENCH_SUMMARY=$(SERVER_BENCH_SUMMARY) python3 Benchmarks/server-bench.py \
	  $$(cd Examples/HummingbirdServer && $(SWIFT) build -c release --show-bin-path)/HummingbirdServer

## CrumbsTracer in a server that traces with swift-otel (its tracer bootstrapped, every span
## sampled and batched, exported nowhere unless BENCH_OTEL_EXPORT=otlp) against the same server
## without CrumbsTracer: the server built with CRUMBS_BENCH_OTEL=1 into a scratch path of its own (about
## seven minutes more the first time), then the requests part with those two variants only.
bench-otel:
	@command -v wrk >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	cd Examples/HummingbirdServer && CRUMBS_BENCH_OTEL=1 $(SWIFT) build -c release --product HummingbirdServer \
	  --disable-build-manifest-caching --scratch-path .build-otel
	SERVER_BENCH_PARTS=requests SERVER_BENCH_VARIANTS=otel,otel-tracer python3 Benchmarks/server-bench.py \
	  $$(cd Examples/HummingbirdServer && CRUMBS_BENCH_OTEL=1 $(SWIFT) build -c release --scratch-path .build-otel \
	  --show-bin-path)/HummingbirdServer

## Each fuzz target for FUZZ_SECONDS (see Fuzz/README.md).
fuzz: deps
	./Fuzz/run.sh $(FUZZ_SECONDS)

## Every Swift file of the repository (both packages) and every C, C++ and header file, for
## format and lint. Build folders are left out (a consumer package the tests build keeps its own).
SWIFT_FORMAT_PATHS = Package.swift Sources Tests Fuzz Benchmarks/Package.swift Benchmarks/Sources \
  Benchmarks/RingAppend Benchmarks/LogHandler Examples/HummingbirdServer/Package.swift \
  Examples/HummingbirdServer/Sources Examples/VaporServer/Package.swift Examples/VaporServer/Sources
C_FORMAT_FILES = $(shell find Sources Tests Fuzz Benchmarks/Sources Scripts -path '*/.build*' -prune -o \
  -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) -print | sort)
## clang-format with the repo's .clang-format (2 spaces, 110 columns: what .swift-format says). Its
## output differs between versions: the one checked is Debian 12's (clang-format 14), which
## clang-format-tool installs when no clang-format is on PATH.
CLANG_FORMAT ?= clang-format

.PHONY: clang-format-tool
clang-format-tool:
	@command -v $(CLANG_FORMAT) >/dev/null 2>&1 || { echo "Installing clang-format (apt-get) for the C format check…"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-format >/dev/null; }

## swift format with the repo's .swift-format and clang-format with its .clang-format, in place.
format: clang-format-tool
	$(SWIFT) format --in-place --recursive $(SWIFT_FORMAT_PATHS)
	$(CLANG_FORMAT) -i --style=file $(C_FORMAT_FILES)

## The format lints: swift format's (any warning fails it: --strict) and clang-format's
## (--dry-run --Werror), so CI holds the format (`make format` fixes most). Also two habits: no
## .PHONY target of this Makefile without a rule, and no issue number in a Swift or C file under
## Sources/ (a comment says the rule, not where it came from).
lint: clang-format-tool
	@for target in $$(sed -n 's/^\.PHONY://p' Makefile); do \
	  grep -q "^$$target:" Makefile || { echo "lint: .PHONY target $$target has no rule" >&2; exit 1; }; \
	done
	@! grep -rnE '\b[Ii]ssues? #?[0-9]+' Sources --include='*.swift' --include='*.[ch]' --include='*.cpp' || \
	  { echo "lint: Sources/ names issues above: say the rule instead" >&2; exit 1; }
	$(SWIFT) format lint --strict --recursive $(SWIFT_FORMAT_PATHS)
	$(CLANG_FORMAT) --dry-run --Werror --style=file $(C_FORMAT_FILES)

clean:
	rm -rf .build .build-* Benchmarks/.build "$(DEMO_DIR)"
