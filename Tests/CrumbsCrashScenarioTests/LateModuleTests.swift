import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

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
    #expect(!module.buildID.isEmpty, "the plugin is linked with a build id")
    // The report says the table was stale and how the library was found.
    #expect(
      report.evidence.contains { $0.contains("loaded after") && $0.contains("libcrumbs_plugin.so") },
      "\(report.evidence)")
  }

  /// A plugin unloaded with dlclose while a function pointer into it is kept, then called: the
  /// module table still has the plugin's row (the app refreshed it after dlopen, not after
  /// dlclose). The handler must read nothing of the unmapped library (its .eh_frame, its text),
  /// and record the crash completely: the stale address, its caller, the module marked unloaded.
  @Test(
    "a call through a stale pointer into a dlclose'd plugin: a complete record with the caller, the module unloaded"
  )
  func staleCallIntoUnloadedPlugin() throws {
    let directory = TestDirectory()
    let plugin = try compileSharedLibrary(pluginSource, named: "crumbs_plugin", in: directory, flags: "-O0")
    let run = try runCrashScenario(
      "dlclose-stale", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: ["CRUMBS_TEST_PLUGIN": plugin])
    let context = run.lines.joined(separator: " | ")
    #expect(run.signal == SIGSEGV, "\(context)")
    try #require(run.lines.contains("unloaded"), "dlclose left the plugin mapped: \(context)")
    let stale = try #require(run.facts["stale"].flatMap { UInt64($0.dropFirst(2), radix: 16) }, "\(context)")
    let caller = try #require(run.functionAddress, "\(context)")

    let record = try CrashRecord.read(file: try #require(run.recordPath, "\(context)"))
    #expect(
      record.status == .complete, "nested signal \(String(describing: record.nestedSignal)): \(context)")
    #expect(record.frames.first == stale, "\(record.frames.prefix(4)): \(context)")
    #expect(record.frames.count >= 3, "\(record.frames): \(context)")
    // The caller, from [sp]: a return address inside crumbs_test_call_pointer.
    #expect(record.frames.dropFirst().first.map { $0 > caller && $0 < caller + 256 } == true, "\(context)")
    #expect(record.threads != nil, "\(context)")
    let row = try #require(record.modules.first { $0.path.hasSuffix("/libcrumbs_plugin.so") }, "\(context)")
    #expect(row.unloaded && !row.foundAtCrash)
    #expect(record.modules.filter(\.unloaded).count == 1, "\(record.modules.filter(\.unloaded).map(\.path))")

    let report = try #require(try crashReport(leftIn: directory)?.report, "\(context)")
    let top = try #require(report.frames.first)
    #expect(top.module?.hasSuffix("/libcrumbs_plugin.so") == true, "\(report.exceptionStacktrace)")
    #expect(top.note?.hasPrefix(SymbolicatedFrame.Note.unloaded) == true, "\(top)")
    // The file is still on disk: the stale code is named all the same.
    #expect(top.function == "crumbs_plugin_crash", "\(report.exceptionStacktrace)")
    #expect(
      report.frames.dropFirst().first?.function == "crumbs_test_call_pointer", "\(report.exceptionStacktrace)"
    )
    #expect(
      report.evidence.contains { $0.contains("unloaded") && $0.contains("libcrumbs_plugin.so") },
      "\(report.evidence)")
  }

  /// A plugin unloaded, another loaded at its address, a crash inside the second: the first's
  /// row (still in the table, same text range) must not name the second's code.
  @Test("a library loaded where a dlclose'd one was is named as itself")
  func libraryAtAnUnloadedOnesAddress() throws {
    let directory = TestDirectory()
    let first = try compileSharedLibrary(pluginSource, named: "crumbs_plugin", in: directory, flags: "-O0")
    let second = try compileSharedLibrary(
      otherPluginSource, named: "crumbs_plugix", in: directory, flags: "-O0")
    let run = try runCrashScenario(
      "dlclose-reload", variant: ChildVariant(release: false, backtracer: false), directory: directory,
      environment: ["CRUMBS_TEST_PLUGIN": first, "CRUMBS_TEST_OTHER_PLUGIN": second])
    let context = run.lines.joined(separator: " | ")
    #expect(run.signal == SIGSEGV, "\(context)")
    guard run.facts["same-address"] == "yes" else {
      print("skipped: the second library was not mapped where the first was (\(context))")
      return
    }
    let record = try CrashRecord.read(file: try #require(run.recordPath, "\(context)"))
    #expect(record.status == .complete)
    let old = try #require(record.modules.first { $0.path.hasSuffix("/libcrumbs_plugin.so") }, "\(context)")
    #expect(old.unloaded)
    let new = try #require(record.modules.first { $0.path.hasSuffix("/libcrumbs_plugix.so") }, "\(context)")
    #expect(!new.unloaded && new.foundAtCrash)

    let report = try #require(try crashReport(leftIn: directory)?.report, "\(context)")
    let top = try #require(report.frames.first)
    #expect(top.module?.hasSuffix("/libcrumbs_plugix.so") == true, "\(report.exceptionStacktrace)")
    #expect(top.function == "crumbs_plugix_store" && top.note == nil, "\(report.exceptionStacktrace)")
  }
}
