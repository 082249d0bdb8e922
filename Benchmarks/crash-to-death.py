#!/usr/bin/env python3
# crash-to-death.py CHILD [SCENARIO] [ROUNDS]: how long a crashed process takes to die with the
# Swift runtime's backtracer chained after Crumbs (its default on Linux) and with
# SWIFT_BACKTRACE=enable=no, alternated. Measured from the test child's "crashing" line (printed
# just before it dereferences null) to the end of its stdout and its exit (the backtracer's
# helper writes there until it ends). SCENARIO: client-dying (a default client; the default),
# or client-crash. Example:
#   python3 Benchmarks/crash-to-death.py .build/debug/CrumbsTestChild client-dying 8
import os, shutil, statistics, subprocess, sys, tempfile, time

child = sys.argv[1]
scenario = sys.argv[2] if len(sys.argv) > 2 else "client-dying"
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
variants = (("on", "enable=yes,interactive=no,color=no"), ("off", "enable=no"))
results = {name: [] for name, _ in variants}
for _ in range(rounds):
    for name, setting in variants:
        directory = tempfile.mkdtemp()
        environment = dict(os.environ, SWIFT_BACKTRACE=setting)
        process = subprocess.Popen([child, scenario, directory + "/d"], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, env=environment)
        started = None
        for line in process.stdout:
            if line.strip() == b"crashing":
                started = time.monotonic()
                break
        process.stdout.read()
        process.wait()
        if started is not None:
            results[name].append((time.monotonic() - started) * 1000)
        shutil.rmtree(directory)
for name, values in results.items():
    if values:
        print(f"backtracer {name}: crash -> death median {statistics.median(values):.1f} ms "
              f"(min {min(values):.1f}, max {max(values):.1f}, n={len(values)})")
