// RecorderProcess — a program that only records (the CrumbsRecorder product: no Foundation), for
// ProcessFigures: a ring in DIR, installed, and the crash handler (see ProcessChildSupport).
import CrumbsRecorder
import ProcessChildSupport

#if canImport(Glibc)
  import Glibc
#endif

report("main \(monotonicNanoseconds())")
let arguments = ChildArguments()
do {
  let started = monotonicNanoseconds()
  let startedCPU = threadCPUNanoseconds()
  let ring = try RingDirectory(path: arguments.directory).createRing()
  ring.install()
  try CrashHandler.install(ring: ring)
  let elapsed = monotonicNanoseconds() - started
  let elapsedCPU = threadCPUNanoseconds() - startedCPU
  addBreadcrumb("ready", level: .info)
  arguments.finish(startNanoseconds: elapsed, startCPUNanoseconds: elapsedCPU)
} catch {
  report("error \(error)")
  exit(1)
}
