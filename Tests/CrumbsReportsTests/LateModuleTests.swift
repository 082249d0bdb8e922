import CrumbsTestSupport
import Testing

@testable import Crumbs
@testable import CrumbsRecorder
@testable import CrumbsReports

#if canImport(Glibc)
  import Glibc
#endif

/// A library loaded with dlopen after the crash handler took its module table, the app calling
/// nothing: a crash inside it must still name the library and, with its symbols, the function.
@Suite("Modules loaded after start")
struct LateModuleTests {
  @Test("a crash in a library dlopen'ed after start names the library and the function")
  func crashInLateLibrary() throws {
    let directory = TestDirectory()
    let plugin = try compileSharedLibrary(pluginSource, named: "crumbs_plugin", in: directory, flags: "-O0")
    let run = try runCrashScenario(
      "dlopen-crash", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: ["CRUMBS_TEST_PLUGIN": plugin])
    #expect(run.signal == SIGSEGV, "\(run.lines)")

    let outcome = PostMortemProcessor(
      directory: try RingDirectory(path: directory.path), store: try ReportStore(directory: directory.path)
    ).run(reportingSession: SessionID())
    #expect(outcome.problems.isEmpty, "\(outcome.problems)")
    let report = try #require(outcome.lastSessionCrashReport)
    let top = try #require(report.frames.first)
    #expect(top.module?.hasSuffix("/libcrumbs_plugin.so") == true, "\(report.exceptionStacktrace)")
    #expect(top.function == "crumbs_plugin_store", "\(report.exceptionStacktrace)")
    #expect(top.note == nil, "\(report.exceptionStacktrace)")
    #expect(
      report.frames.dropFirst().prefix(3).contains { $0.function == "crumbs_plugin_crash" },
      "\(report.exceptionStacktrace)")
    let module = try #require(report.modules.first { $0.path.hasSuffix("/libcrumbs_plugin.so") })
    #expect(module.buildID != nil)
    // The report says the table was stale and how the library was found.
    #expect(
      report.evidence.contains { $0.contains("loaded after") && $0.contains("libcrumbs_plugin.so") },
      "\(report.evidence)")
  }
}
