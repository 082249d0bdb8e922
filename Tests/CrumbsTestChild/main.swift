// crumbs-test-child SCENARIO [ARGS...]: a process for tests to start, kill or crash on demand.
// Each scenario prints what the test needs to check (e.g. "ready", addresses) on stdout, one
// fact a line, and flushes. Scenarios live in one file per area.
#if canImport(Glibc)
  import Glibc
#endif

let scenarios = [
  ringScenarios, crashScenarios, reportScenarios, automaticScenarios, sessionScenarios, forkScenarios,
  storeScenarios, hostScenarios, hangScenarios, hangRecordScenarios, liveCaptureScenarios, dumpScenarios,
  terminationMessageScenarios, crashLoopScenarios, uncleanEndScenarios, collectScenarios,
  attributeScenarios, releaseHealthScenarios, consentScenarios, redactionScenarios, altstackScenarios,
  hostileDumpScenarios, signalChainScenarios, firstChanceScenarios, dyingScenarios, memoryScenarios,
  ledgerScenarios, tracerScenarios, readinessScenarios, closingSpanScenarios, operationHangScenarios,
  waitScenarios, mutexCycleScenarios, poolScenarios,
].reduce(
  into: [String: @Sendable ([String]) -> Int32]()
) { all, table in all.merge(table) { first, _ in first } }
let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let scenario = scenarios[name] else {
  let known = scenarios.keys.sorted().joined(separator: ", ")
  print("usage: crumbs-test-child SCENARIO [ARGS...]; scenarios: \(known)")
  exit(64)
}
exit(scenario(Array(arguments.dropFirst())))
