#!/bin/sh
# collector-soak.sh — `crumbs collect --watch` over a long run (issue 24): short processes of the
# test child start a client in one Crumbs directory and crash (SIGSEGV), get SIGKILLed, or exit
# cleanly, one after another, for MINUTES minutes, while a loopback OTLP server counts what
# arrives. Prints the collector's resident memory (VmRSS) and open descriptors (/proc/PID/fd)
# at the start, the end and their maximum (sampled every 5 s; RssAnon too: most of VmRSS is the
# Swift runtime's and Foundation's code, paged in as code paths first run), the sessions run, the reports
# received, and each crash's and kill's latency (the moment the child died → the report's
# request at the server). Not a timed test: figures for the note and docs/figures.md; with
# BENCH_SUMMARY set (make bench runs it for half a minute), the headline figures are added there.
# Usage, from the repository root:
#   sh Benchmarks/collector-soak.sh [MINUTES] [CRUMBS] [CHILD]
set -eu
MINUTES=${1:-10}
CRUMBS=${2:-$(swift build --show-bin-path)/crumbs}
CHILD=${3:-}
if [ -z "$CHILD" ]; then
  CHILD=.build-release-child/release/CrumbsTestChild
  [ -x "$CHILD" ] || CHILD=$(swift build --show-bin-path)/CrumbsTestChild
fi
dir=$(mktemp -d)
echo "crumbs: $CRUMBS, child: $CHILD, $MINUTES minutes, load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$MINUTES" "$CRUMBS" "$CHILD" "$dir" <<'PY'
import os, signal, subprocess, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

minutes, crumbs, child, scratch = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
directory = scratch + "/crumbs"
lock = threading.Lock()
waiting = {}       # session id (bytes) -> the moment its process died
latencies = {"crash": [], "kill": []}
counts = {"requests": 0, "reports": 0}

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        now = time.monotonic()
        with lock:
            counts["requests"] += 1
            if b"crumbs.report.id" in body:
                counts["reports"] += 1
                for session in [s for s in waiting if s in body]:
                    died, kind = waiting.pop(session)
                    latencies[kind].append(now - died)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = "http://127.0.0.1:%d" % server.server_address[1]
collector = subprocess.Popen(
    [crumbs, "collect", "--watch", "--dir", directory, "--otlp", url],
    stdout=subprocess.PIPE, stderr=open(scratch + "/collector.stderr", "w"), text=True)
print("collector:", collector.stdout.readline().strip(), flush=True)
threading.Thread(target=lambda: [None for _ in collector.stdout], daemon=True).start()

def sample():
    with open("/proc/%d/status" % collector.pid) as status:
        fields = {l.split(":")[0]: l.split()[1] for l in status if l.startswith(("VmRSS:", "RssAnon:"))}
    return int(fields["VmRSS"]), len(os.listdir("/proc/%d/fd" % collector.pid)), int(fields["RssAnon"])

environment = dict(os.environ, SWIFT_BACKTRACE="enable=no")
samples = [sample()]
sessions = {"crash": 0, "kill": 0, "clean": 0}
start = time.monotonic()
last_sample = start
kinds = ["crash", "kill", "clean"]
while time.monotonic() - start < minutes * 60:
    kind = kinds[sum(sessions.values()) % 3]
    if kind == "crash":
        process = subprocess.Popen([child, "client-crash", directory], stdout=subprocess.PIPE, env=environment)
        session = process.stdout.readline().split()[-1]
        process.wait()
        with lock:
            waiting[session] = (time.monotonic(), "crash")
    elif kind == "kill":
        process = subprocess.Popen([child, "client-wait", directory], stdout=subprocess.PIPE, env=environment)
        session = process.stdout.readline().split()[-1]
        process.kill()
        process.wait()
        with lock:
            waiting[session] = (time.monotonic(), "kill")
    else:
        subprocess.run([child, "client-quick-exit", directory], stdout=subprocess.DEVNULL, env=environment)
    sessions[kind] += 1
    if time.monotonic() - last_sample >= 5:
        samples.append(sample())
        last_sample = time.monotonic()

# Let the last reports arrive (bounded), then stop the collector as a service manager would.
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    with lock:
        if not waiting:
            break
    time.sleep(0.1)
samples.append(sample())
stopped = time.monotonic()
collector.send_signal(signal.SIGTERM)
status = collector.wait(timeout=60)
print("sessions: %d crashed, %d killed, %d clean in %.0f s" % (
    sessions["crash"], sessions["kill"], sessions["clean"], time.monotonic() - start))
print("server: %d requests, %d reports; %d crash/kill reports never arrived" % (
    counts["requests"], counts["reports"], len(waiting)))
rss = [s[0] for s in samples]
fds = [s[1] for s in samples]
anon = [s[2] for s in samples]
print("collector VmRSS kB: start %d, end %d, max %d (%d samples)" % (rss[0], rss[-1], max(rss), len(rss)))
print("collector RssAnon kB (heap, stacks; the rest is mapped code): start %d, end %d, max %d" % (
    anon[0], anon[-1], max(anon)))
print("collector open fds: start %d, end %d, max %d" % (fds[0], fds[-1], max(fds)))
for kind in ("crash", "kill"):
    values = sorted(latencies[kind])
    if values:
        pick = lambda q: values[min(len(values) - 1, int(q * len(values)))] * 1000
        print("%s → report at the server, ms: median %.0f, p95 %.0f, max %.0f (%d)" % (
            kind, pick(0.5), pick(0.95), values[-1] * 1000, len(values)))
print("SIGTERM → exit status %d in %.0f ms" % (status, (time.monotonic() - stopped) * 1000))
server.shutdown()
# make bench: the headline figures for its summary table (figure|value|goal|verdict).
summary = os.environ.get("BENCH_SUMMARY")
if summary:
    with open(summary, "a") as out:
        for kind, what in (("crash", "a crash"), ("kill", "a SIGKILL")):
            values = sorted(latencies[kind])
            if not values:
                continue
            p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
            out.write("crumbs collect --watch: %s → report at the server|median %.0f ms, p95 %.0f ms (%d)|≤ 2 s|%s\n" % (
                what, values[len(values) // 2] * 1000, p95 * 1000, len(values),
                "met" if p95 <= 2 and not waiting else "MISSED"))
        out.write("crumbs collect --watch: RSS and fds over the run|%d → %d kB, %d → %d fds (%d sessions)||\n" % (
            rss[0], rss[-1], fds[0], fds[-1], sum(sessions.values())))
PY
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
case "$dir" in /tmp/*) rm -rf "$dir" ;; esac
