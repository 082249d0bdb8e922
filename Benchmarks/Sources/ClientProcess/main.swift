// ClientProcess — a program that starts the whole SDK (`CrumbsClient.start` with the default
// configuration, no destination), for ProcessFigures (see ProcessChildSupport). It waits for the
// client's background start-up work before it ends, so an end measures a running client.
import Crumbs
import ProcessChildSupport

#if canImport(Glibc)
  import Glibc
#endif

report("main \(monotonicNanoseconds())")
let arguments = ChildArguments()
do {
  let configuring = monotonicNanoseconds()
  var configuration = CrumbsConfiguration(directory: arguments.directory)
  configuration.appName = "process-figures"
  // ProcessFigures' reference kind "client, no memory monitor": the same client without its one
  // long-lived thread, to show what that thread adds to a death and an exit.
  if getenv("CRUMBS_BENCH_NO_MEMORY_MONITOR") != nil {
    configuration.automaticBreadcrumbs?.memoryPressure = nil
  }
  let configured = monotonicNanoseconds() - configuring
  let started = monotonicNanoseconds()
  let startedCPU = threadCPUNanoseconds()
  let client = try CrumbsClient.start(configuration)
  let elapsed = monotonicNanoseconds() - started
  let elapsedCPU = threadCPUNanoseconds() - startedCPU
  client.waitForPreviousSessions()
  client.addBreadcrumb("ready", level: .info)
  arguments.finish(
    startNanoseconds: elapsed, startCPUNanoseconds: elapsedCPU, configurationNanoseconds: configured)
} catch {
  report("error \(error)")
  exit(1)
}
