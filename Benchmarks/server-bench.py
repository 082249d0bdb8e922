#!/usr/bin/env python3
# server-bench.py SERVER [ROUNDS]: what Crumbs costs a real Hummingbird 2 server
# (Examples/HummingbirdServer), as same-run ratios, the variants alternated round by round:
#
#   readiness   spawn → first 200 of GET /hello, `none` (no Crumbs) against `client` starting
#               over a copy of a directory where the server crashed (a report to make and send);
#               then again with the server pinned to one CPU (a container limited to one)
#   memory      VmRSS and Pss (/proc/PID/smaps_rollup) once the `client` server delivered that
#               report to the loopback OTLP server this script runs (measured when the report is
#               in sent/, after the POST arrived), against `none` after its first response; and
#               the ring's own resident pages, so what the client costs beyond the ring is shown
#   requests    wrk on loopback against GET /hello: throughput and p99 of `none`, `client` and
#               `breadcrumbs` (a breadcrumb at each request's start and end), ratios to `none`;
#               and the server's CPU time per request (/proc/PID/stat), which a busy machine
#               moves far less than throughput; and `tracer` (Hummingbird's TracingMiddleware
#               with CrumbsTracer wrapping NoOpTracer) against `bootstrapped` (the same
#               middleware with NoOpTracer bootstrapped, where an app bootstraps swift-otel's
#               tracer: the server less CrumbsTracer) and against `traced` (the same middleware,
#               no tracer bootstrapped)
#
# Every wait is on an event, bounded: the port answering (connection attempts 0.5 ms apart),
# the report in sent/ after the POST, the process's exit. With BENCH_SUMMARY set, the headline
# lines are added to that file for Benchmarks/summary.sh (figure|value|goal|verdict).
# SERVER_BENCH_PARTS=requests (or readiness) runs only that part; SERVER_BENCH_VARIANTS (e.g.
# `traced,bootstrapped,tracer`) only those servers in it; `otel,otel-tracer` needs the server
# built with swift-otel: `make bench-otel`.
# Example (make bench does this):
#   python3 Benchmarks/server-bench.py Examples/HummingbirdServer/.build/release/HummingbirdServer
import http.server, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, threading, time

SERVER = os.path.abspath(sys.argv[1])
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
WRK_ROUNDS = max(3, ROUNDS // 2)
WRK_SECONDS = 3
# Processes of each variant, taking the wrk rounds in turn. A server process stays faster or
# slower for its whole life, with the same binary and variant (three `otel` processes in one run
# served 16.6k, 17.7k and 17.7k requests/s): with one process a variant, that luck weighed on a
# ratio as much as the variant did. SERVER_BENCH_PROCESSES=1 is the old way.
PROCESSES = max(1, int(os.environ.get("SERVER_BENCH_PROCESSES", "3")))


class OTLPServer(http.server.ThreadingHTTPServer):
    """A loopback OTLP/HTTP endpoint: answers 200 to every POST and counts them."""

    daemon_threads = True

    def __init__(self):
        self.posts = 0
        self.changed = threading.Condition()
        super().__init__(("127.0.0.1", 0), OTLPHandler)


class OTLPHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                self.rfile.read(size + 2)
                if size == 0:
                    break
        else:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
        with self.server.changed:
            self.server.posts += 1
            self.server.changed.notify_all()

    def log_message(self, *_):
        pass


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def spawn(variant, port, directory, otlp, cpu=None):
    environment = dict(os.environ, BENCH_VARIANT=variant, PORT=str(port), CRUMBS_DIRECTORY=directory,
                       CRUMBS_OTLP_ENDPOINT="http://127.0.0.1:%d" % otlp.server_port,
                       # A crash dies at once, as a server should be set up (docs/client.md).
                       SWIFT_BACKTRACE="enable=no")
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "CRUMBS_DISABLED"):
        environment.pop(name, None)
    # On one CPU (a container limited to one): whatever Crumbs does beside the server's start
    # then takes that CPU from it, unless it waits or yields.
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    return subprocess.Popen([SERVER], env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=pin)


def get(port, path):
    """The status of GET path, or None when the port does not answer yet."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % path.encode())
            head = connection.recv(64)
    except (ConnectionRefusedError, ConnectionResetError):
        return None
    match = re.match(rb"HTTP/1\.1 (\d+)", head)
    return int(match.group(1)) if match else None


def wait_ready(process, port, seconds=60):
    """Seconds from now to the first 200 of GET /hello (attempts 0.5 ms apart, bounded)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if get(port, "/hello") == 200:
            return time.monotonic()
        if process.poll() is not None:
            sys.exit("server-bench: the server exited with %s before answering" % process.returncode)
        time.sleep(0.0005)
    sys.exit("server-bench: no answer on port %d within %d s" % (port, seconds))


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            sys.exit("server-bench: %s did not happen within %d s" % (what, seconds))
        time.sleep(0.005)


def reports(directory, state):
    folder = os.path.join(directory, "reports", state)
    return [name for name in os.listdir(folder) if not name.startswith(".")] if os.path.isdir(folder) else []


def memory(pid):
    """VmRSS, Pss, and the ring's size and resident pages (its mapping under rings/ in
    /proc/PID/smaps), in kB."""
    status = open("/proc/%d/status" % pid).read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    pss = int(re.search(r"^Pss:\s+(\d+)", open("/proc/%d/smaps_rollup" % pid).read(), re.M).group(1))
    ring_size, ring_rss, in_ring = 0, 0, False
    for line in open("/proc/%d/smaps" % pid):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            in_ring = "/rings/" in line and line.rstrip().endswith(".ring")
        elif in_ring and line.startswith("Size:"):
            ring_size += int(line.split()[1])
        elif in_ring and line.startswith("Rss:"):
            ring_rss += int(line.split()[1])
    return rss, pss, ring_size, ring_rss


def crashed_directory(otlp, base):
    """A Crumbs directory where the server crashed in a route (what the `client` rounds process)."""
    directory = os.path.join(base, "crashed")
    port = free_port()
    process = spawn("client", port, directory, otlp)
    wait_ready(process, port)
    get(port, "/crash")
    process.wait(timeout=60)
    if process.returncode != -signal.SIGSEGV:
        sys.exit("server-bench: the crash route ended the server with %s, not SIGSEGV" % process.returncode)
    return directory


def readiness_and_memory(otlp, base, template, cpu=None):
    ready = {"none": [], "client": []}
    paired = []
    rss = {"none": [], "client": []}
    pss = {"none": [], "client": []}
    ring = []
    for round in range(ROUNDS):
        order = ("none", "client") if round % 2 == 0 else ("client", "none")
        times = {}
        for variant in order:
            directory = os.path.join(base, "round-%d-%s-%s" % (round, variant, cpu))
            if variant == "client":
                shutil.copytree(template, directory, symlinks=True)
            port = free_port()
            posts = otlp.posts
            started = time.monotonic()
            process = spawn(variant, port, directory, otlp, cpu)
            times[variant] = (wait_ready(process, port) - started) * 1000
            if variant == "client":
                # The delivery: the POST arrived and the report is in sent/ (nothing pending).
                with otlp.changed:
                    if not otlp.changed.wait_for(lambda: otlp.posts > posts, timeout=60):
                        sys.exit("server-bench: the previous session's report was never posted")
                wait_for(lambda: reports(directory, "sent") and not reports(directory, "pending"), 60,
                         "the report's move to sent/")
            kb = memory(process.pid)
            rss[variant].append(kb[0])
            pss[variant].append(kb[1])
            if variant == "client":
                ring.append((kb[2], kb[3]))
            stop(process)
            ready[variant].append(times[variant])
        paired.append(times["client"] - times["none"])
    return ready, paired, rss, pss, ring


def cpu_seconds(pid):
    """The process's user + system CPU time so far (all its threads), from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_ticks(pid):
    """Each thread's user + system CPU ticks so far, by thread id: (group, ticks). The group is
    what the thread's name says it is: Swift concurrency's pool (libdispatch's `…-qos` workers),
    NIO's event loops, Crumbs' own threads, or other."""
    threads = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as comm_file:
                comm = comm_file.read().strip()
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        group = ("pool" if "qos" in comm else "event loops" if comm.startswith("NIO-")
                 else "crumbs" if comm.startswith("crumbs") else "other")
        threads[tid] = (group, int(fields[11]) + int(fields[12]))
    return threads


def wrk(process, port):
    """wrk against GET /hello: throughput, p99 (ms), the server's CPU time per request (µs), and
    that CPU time by thread group (µs per request; thread_ticks).
    CPU per request is what the server pays for each answer, whatever else the machine runs: on
    a busy machine it varies far less than throughput, which moves with every other process."""
    threads_before = thread_ticks(process.pid)
    before = cpu_seconds(process.pid)
    output = subprocess.run(["wrk", "-t2", "-c32", "-d%ds" % WRK_SECONDS, "--latency",
                             "http://127.0.0.1:%d/hello" % port],
                            capture_output=True, text=True, timeout=WRK_SECONDS + 60).stdout
    spent = cpu_seconds(process.pid) - before
    throughput = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    answered = int(re.search(r"(\d+) requests in", output).group(1))
    value, unit = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", output, re.M).groups()
    by_group = {}
    for tid, (group, ticks) in thread_ticks(process.pid).items():
        spent_ticks = ticks - threads_before.get(tid, (group, 0))[1]
        by_group[group] = by_group.get(group, 0) + spent_ticks * 1e6 / os.sysconf("SC_CLK_TCK") / max(answered, 1)
    return (throughput, float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit], spent * 1e6 / max(answered, 1),
            by_group)


REQUEST_VARIANTS = ("none", "client", "breadcrumbs", "traced", "bootstrapped", "tracer")
# Only in a server built with CRUMBS_BENCH_OTEL=1 (Examples/HummingbirdServer/Package.swift), so
# asked for by name: `otel` (swift-otel's tracer bootstrapped) and `otel-tracer` (CrumbsTracer
# wrapping it).
OTEL_VARIANTS = ("otel", "otel-tracer")


def requests(otlp, base):
    variants = tuple(os.environ.get("SERVER_BENCH_VARIANTS", ",".join(REQUEST_VARIANTS)).split(","))
    unknown = set(variants) - set(REQUEST_VARIANTS + OTEL_VARIANTS)
    if unknown:
        sys.exit("server-bench: unknown SERVER_BENCH_VARIANTS %s (known: %s)"
                 % (",".join(sorted(unknown)), ",".join(REQUEST_VARIANTS + OTEL_VARIANTS)))
    servers = {}
    for variant in variants:
        servers[variant] = []
        for index in range(PROCESSES):
            port = free_port()
            process = spawn(variant, port, os.path.join(base, "wrk-%s-%d" % (variant, index)), otlp)
            wait_ready(process, port)
            servers[variant].append((process, port))
    throughput = {variant: [] for variant in variants}
    p99 = {variant: [] for variant in variants}
    cpu = {variant: [] for variant in variants}
    threads = {variant: {} for variant in variants}
    try:
        for variant in variants:
            for _, port in servers[variant]:
                subprocess.run(["wrk", "-t2", "-c32", "-d1s", "http://127.0.0.1:%d/hello" % port],
                               capture_output=True, timeout=60)
        for round in range(WRK_ROUNDS):
            shift = round % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                rate, latency, per_request, by_group = wrk(*servers[variant][round % PROCESSES])
                throughput[variant].append(rate)
                p99[variant].append(latency)
                cpu[variant].append(per_request)
                for group, value in by_group.items():
                    threads[variant].setdefault(group, []).append(value)
    finally:
        for started in servers.values():
            for process, _ in started:
                stop(process)
    return throughput, p99, cpu, threads


def main():
    if not shutil.which("wrk"):
        sys.exit("server-bench: wrk is not installed (apt-get install wrk)")
    otlp = OTLPServer()
    threading.Thread(target=otlp.serve_forever, daemon=True).start()
    base = tempfile.mkdtemp(prefix="server-bench-")
    parts = os.environ.get("SERVER_BENCH_PARTS", "readiness,requests").split(",")
    try:
        if "readiness" in parts:
            template = crashed_directory(otlp, base)
            ready, paired, rss, pss, ring = readiness_and_memory(otlp, base, template)
            one_cpu = max(os.sched_getaffinity(0))
            ready_1, paired_1, _, _, _ = readiness_and_memory(otlp, base, template, one_cpu)
        if "requests" in parts:
            throughput, p99, cpu, threads = requests(otlp, base)
    finally:
        otlp.shutdown()
        if base.startswith(tempfile.gettempdir() + "/server-bench-"):
            shutil.rmtree(base, ignore_errors=True)

    median = statistics.median
    print("== A Hummingbird server with and without Crumbs (%d rounds alternated; wrk %d × %d s) =="
          % (ROUNDS, WRK_ROUNDS, WRK_SECONDS))
    print("   machine: %d CPUs, load average %s" % (os.cpu_count(), open("/proc/loadavg").read().split()[0]))
    rows, summary_lines = [], []
    if "readiness" in parts:
        readiness_rows(ready, paired, paired_1, ready_1, rss, pss, ring, rows, summary_lines)
    if "requests" in parts:
        request_rows(throughput, p99, cpu, rows, summary_lines)
    for figure, value, goal, met in rows:
        print("   %-45s %s%s" % (figure, value, "" if not goal else "   goal %s: %s" % (goal, "met" if met else "MISSED")))
    if "requests" in parts:
        # Where each variant's CPU goes, by thread group (medians over the rounds): a variant
        # that costs more shows on which threads.
        for variant, groups in threads.items():
            print("   CPU per request by threads, %-12s %s" % (variant + ":", ", ".join(
                "%s %.1f µs" % (group, median(values)) for group, values in sorted(groups.items())
                if median(values) >= 0.05)))
    if "readiness" in parts:
        print("   readiness ms, none:   " + " ".join("%.1f" % value for value in ready["none"]))
        print("   readiness ms, client: " + " ".join("%.1f" % value for value in ready["client"]))
    summary = os.environ.get("BENCH_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.writelines(summary_lines)


def readiness_rows(ready, paired, paired_1, ready_1, rss, pss, ring, rows, summary_lines):
    median = statistics.median
    ready_none, ready_client = median(ready["none"]), median(ready["client"])
    extra = median(paired)
    extra_1 = median(paired_1)
    rss_extra = (median(rss["client"]) - median(rss["none"])) / 1024
    pss_extra = (median(pss["client"]) - median(pss["none"])) / 1024
    # The ring is a shared file mapping whose pages become resident as breadcrumbs fill it: what
    # the client costs beyond it is the difference less the ring's resident pages now; a
    # long-running server holds the whole ring besides.
    ring_mb = median(size for size, _ in ring) / 1024
    ring_resident_kb = median(resident for _, resident in ring)
    beyond = rss_extra - ring_resident_kb / 1024
    rows += [
        ("start → first response, a crash to process", "none %.1f ms, client %.1f ms: %+.1f ms (paired median)"
         % (ready_none, ready_client, extra), "≤ +5 ms", extra <= 5),
        ("  the server on one CPU", "none %.1f ms, client %.1f ms: %+.1f ms (paired median)"
         % (median(ready_1["none"]), median(ready_1["client"]), extra_1), "≤ +5 ms", extra_1 <= 5),
        ("RSS after delivering the report", "none %.1f MB, client %.1f MB: %+.1f MB (Pss %+.1f MB)"
         % (median(rss["none"]) / 1024, median(rss["client"]) / 1024, rss_extra, pss_extra), "", None),
        ("  beyond the ring", "%+.1f MB (the ring: %.1f MB mapped, %d kB resident now)"
         % (beyond, ring_mb, ring_resident_kb), "≤ +5 MB", beyond <= 5),
    ]
    summary_lines += [
        "Hummingbird server: start → first response, client − none (a crash to process)|"
        "%+.1f ms (none %.1f ms, client %.1f ms)|≤ +5 ms|%s\n"
        % (extra, ready_none, ready_client, "met" if extra <= 5 else "MISSED"),
        "Hummingbird server on one CPU: start → first response, client − none|"
        "%+.1f ms (none %.1f ms, client %.1f ms)|≤ +5 ms|%s\n"
        % (extra_1, median(ready_1["none"]), median(ready_1["client"]), "met" if extra_1 <= 5 else "MISSED"),
        "Hummingbird server: RSS after delivering a report, client − none|"
        "%+.1f MB (Pss %+.1f MB), %+.1f MB beyond the ring (%.1f MB mapped, %d kB resident)"
        "|≤ +5 MB beyond the ring|%s\n"
        % (rss_extra, pss_extra, beyond, ring_mb, ring_resident_kb, "met" if beyond <= 5 else "MISSED"),
    ]


def request_rows(throughput, p99, cpu, rows, summary_lines):
    median = statistics.median
    rate = {variant: median(values) for variant, values in throughput.items()}
    latency = {variant: median(values) for variant, values in p99.items()}
    # Ratios within each round (the variants measured back to back), then their median.
    def ratio(variant, base="none"):
        return median(value / other for value, other in zip(throughput[variant], throughput[base]))

    def cpu_ratio(variant, base="none"):
        return median(value / other for value, other in zip(cpu[variant], cpu[base]))

    if {"none", "client", "breadcrumbs"} <= throughput.keys():
        client_ratio, breadcrumbs_ratio = ratio("client"), ratio("breadcrumbs")
        cpu_client, cpu_breadcrumbs = cpu_ratio("client"), cpu_ratio("breadcrumbs")
        rows += [
            ("throughput, GET /hello", "none %.0f/s, client %.3f×, breadcrumbs %.3f×"
             % (rate["none"], client_ratio, breadcrumbs_ratio), "breadcrumbs ≥ 0.98×", breadcrumbs_ratio >= 0.98),
            ("server CPU per request, GET /hello", "none %.1f µs, client %.3f×, breadcrumbs %.3f×"
             % (median(cpu["none"]), cpu_client, cpu_breadcrumbs), "breadcrumbs ≤ 1.02×", cpu_breadcrumbs <= 1.02),
            ("p99 latency, GET /hello", "none %.2f ms, client %.2f ms, breadcrumbs %.2f ms"
             % (latency["none"], latency["client"], latency["breadcrumbs"]), "", None),
        ]
        summary_lines += [
            "Hummingbird server (wrk): throughput client / breadcrumbs vs none|"
            "%.3f× / %.3f× (none %.0f req/s)|breadcrumbs ≥ 0.98×|%s\n"
            % (client_ratio, breadcrumbs_ratio, rate["none"], "met" if breadcrumbs_ratio >= 0.98 else "MISSED"),
            "Hummingbird server (wrk): server CPU per request, client / breadcrumbs vs none|"
            "%.3f× / %.3f× (none %.1f µs)|breadcrumbs ≤ 1.02×|%s\n"
            % (cpu_client, cpu_breadcrumbs, median(cpu["none"]), "met" if cpu_breadcrumbs <= 1.02 else "MISSED"),
            "Hummingbird server (wrk): p99 none / client / breadcrumbs|%.2f / %.2f / %.2f ms||\n"
            % (latency["none"], latency["client"], latency["breadcrumbs"]),
        ]
    # CrumbsTracer against the same traced server without it. The goal is judged against
    # `bootstrapped` (an app that adds CrumbsTracer over NoOpTracer pays InstrumentationSystem's
    # look-up of a bootstrapped tracer with or without it) and against `otel` (swift-otel's
    # tracer, which most traced apps bootstrap; CrumbsTracer then wraps it).
    pairs = (("tracer", "bootstrapped", "NoOpTracer bootstrapped", True),
             ("tracer", "traced", "none bootstrapped", False),
             ("otel-tracer", "otel", "swift-otel's tracer bootstrapped", True))
    for variant, base, label, goal in pairs:
        if not {variant, base} <= throughput.keys():
            continue
        tracer_ratio, cpu_tracer = ratio(variant, base), cpu_ratio(variant, base)
        rows.append(
            ("CrumbsTracer vs the traced server, %s" % label,
             "throughput %.3f×, CPU per request %.3f× (%s %.0f/s, %.1f µs)"
             % (tracer_ratio, cpu_tracer, base, rate[base], median(cpu[base])),
             "throughput ≥ 0.97×" if goal else "", tracer_ratio >= 0.97 if goal else None))
        summary_lines.append(
            "Hummingbird server (wrk): TracingMiddleware with CrumbsTracer vs without, %s|"
            "throughput %.3f×, CPU per request %.3f×|%s|%s\n"
            % (label, tracer_ratio, cpu_tracer, "throughput ≥ 0.97×" if goal else "",
               ("met" if tracer_ratio >= 0.97 else "MISSED") if goal else ""))


main()
