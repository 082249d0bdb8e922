// Installs a ring and the crash handler, then starts a thread each way a program does: a
// pthread, a Dispatch worker, a Task. Each reports whether it ran and had an alternate signal
// stack. Its arguments: the Crumbs directory, then `threads` (exit 0 after the report) or
// `crash` (after it, a stack overflow on a Dispatch worker: only an alternate stack lets the
// handler record it). Every wait is bounded: a thread that never starts prints `ran false`.
import CrumbsRecorder
import Dispatch
import Glibc

let directory = try RingDirectory(path: CommandLine.arguments[1])
var options = RingOptions()
options.appName = "static-consumer"
let ring = try directory.createRing(options: options)
ring.install()
try CrashHandler.install(ring: ring)
print("ring \(ring.path)")
print("covers-new-threads \(CrashHandler.coversNewThreads)")

func hasAlternateStack() -> Bool {
  var current = stack_t()
  return sigaltstack(nil, &current) == 0 && current.ss_flags & Int32(SS_DISABLE) == 0
}

/// What a thread reports, written by it before it signals.
final class Report: @unchecked Sendable {
  let done = DispatchSemaphore(value: 0)
  var alternateStack = false

  func arrive() {
    alternateStack = hasAlternateStack()
    done.signal()
  }

  func line(_ kind: String, started: Bool = true) -> String {
    let ran = started && done.wait(timeout: .now() + .seconds(60)) == .success
    return "\(kind) ran \(ran) alternate-stack \(ran && alternateStack)"
  }
}

/// A pthread's start routine: a plain function (a closure written here would be isolated to
/// the main actor, as top-level code is, and trap on another thread).
func pthreadStart(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
  Unmanaged<Report>.fromOpaque(context!).takeUnretainedValue().arrive()
  return nil
}

let pthreadReport = Report()
var thread = pthread_t()
let created = pthread_create(&thread, nil, pthreadStart, Unmanaged.passUnretained(pthreadReport).toOpaque())
print("pthread_create \(created)")
print(pthreadReport.line("pthread", started: created == 0))
if created == 0 { pthread_join(thread, nil) }

let dispatchReport = Report()
DispatchQueue.global().async { dispatchReport.arrive() }
print(dispatchReport.line("dispatch"))

let taskReport = Report()
Task.detached { taskReport.arrive() }
print(taskReport.line("task"))

/// Recurses until the stack is gone (a debug build: no tail calls).
@inline(never) func overflow(_ depth: Int) -> Int {
  var local = (depth, depth, depth, depth, depth, depth, depth, depth)
  return withUnsafeMutableBytes(of: &local) { bytes in
    depth < 0 ? Int(bytes[0]) : overflow(depth + 1) + Int(bytes[1])
  }
}

if CommandLine.arguments.count > 2 && CommandLine.arguments[2] == "crash" {
  print("crashing")
  fflush(nil)
  DispatchQueue.global().async { _ = overflow(0) }
  while true { pause() }
}
ring.close(clean: true)
