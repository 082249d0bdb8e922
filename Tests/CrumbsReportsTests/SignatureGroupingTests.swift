// SignatureGroupingTests.swift — a crash keeps its signature (and so its Backtrace fingerprint)
// across a deploy that renumbers the compiler's closures (issue 37): two real builds of a small
// router, the second with one route more, named by reading their symbol tables the way a next
// launch does; and the grouping name of each kind of word the compiler adds.

import CrumbsPlatform
import CrumbsReportTestSupport
import CrumbsTestSupport
import Testing

@testable import CrumbsReports

@Suite struct SignatureGroupingTests {
  /// A server's routes, each a closure in one generic function; `NEW ROUTE` marks where the
  /// second build adds one, before the route that crashes.
  private static let router = """
    protocol Router { mutating func add(_ path: String, _ handler: @escaping (Int) -> Int) }
    struct Routes: Router {
      var handlers: [String: (Int) -> Int] = [:]
      mutating func add(_ path: String, _ handler: @escaping (Int) -> Int) { handlers[path] = handler }
    }
    @inline(never) func checkout(_ items: Int) -> Int {
      precondition(items >= 0, "negative cart")
      return items
    }
    func buildShopRouter<R: Router>(_ router: R) -> R {
      var router = router
      router.add("/") { $0 + 1 }
      // NEW ROUTE
      router.add("/cart") { checkout($0 - 100) }
      return router
    }
    func buildAdminRouter<R: Router>(_ router: R) -> R {
      var router = router
      router.add("/admin") { checkout($0) }
      return router
    }
    let shop = buildShopRouter(Routes())
    let admin = buildAdminRouter(Routes())
    print(shop.handlers.count + admin.handlers.count)
    """

  /// Builds `source` as the executable `name` and returns its path and the readable name of
  /// every function in its symbol table (as symbolication names a frame).
  private func build(_ source: String, _ name: String, in directory: TestDirectory) throws
    -> (path: String, functions: Set<String>)
  {
    let sourcePath = directory.file(name + ".swift")
    try Syscall.writeFileAtomically(sourcePath, Array(source.utf8), durable: false)
    let executable = directory.file(name)
    let built = try Subprocess.run(
      "/usr/bin/env", ["swiftc", "-Onone", "-module-name", "Shop", sourcePath, "-o", executable],
      timeoutMilliseconds: 10 * 60_000)
    let log = String(decoding: built.standardOutput + built.standardError, as: UTF8.self)
    try #require(built.exitStatus == 0, "swiftc failed:\n\(log)")
    let image = try ELFImage.read(path: executable)
    return (executable, Set(image.symbols.compactMap { SymbolDemangler.readable($0.name) }))
  }

  /// A crash report whose top frame in `executable` is `function`.
  private func crash(in function: String, executable: String) -> CrashReport {
    var report = CrashReport.sample(type: "SIGILL")
    report.resource["process.executable.path"] = executable
    report.frames = [
      CrashReport.Frame(
        index: 0, address: "0x1000", module: executable, moduleOffset: "0x1000", buildID: nil,
        function: function, symbol: nil, symbolOffset: nil, file: nil, line: nil, note: nil)
    ]
    return report
  }

  @Test func addingARouteBeforeTheCrashingOneKeepsTheSignatureAndAnotherFunctionStillDiffers() throws {
    let directory = TestDirectory()
    let before = try build(Self.router, "before", in: directory)
    let after = try build(
      Self.router.replacing("// NEW ROUTE", with: "router.add(\"/wishlist\") { $0 * 2 }"), "after",
      in: directory)
    // The compiler numbers closures by position: the crashing route is #2, then #3.
    let crashing = "closure #2 in buildShopRouter<A>(_:)"
    let renumbered = "closure #3 in buildShopRouter<A>(_:)"
    #expect(before.functions.contains(crashing), "\(before.functions.filter { $0.contains("Router") })")
    #expect(!before.functions.contains(renumbered))
    #expect(after.functions.contains(renumbered), "\(after.functions.filter { $0.contains("Router") })")

    let first = crash(in: crashing, executable: before.path)
    let second = crash(in: renumbered, executable: after.path)
    #expect(first.signature == second.signature)
    #expect(first.signatureDigest == second.signatureDigest)  // Backtrace's _mod_fingerprint
    #expect(first.signature == "crash | SIGILL | closure in buildShopRouter(_:)")

    let admin = "closure #1 in buildAdminRouter<A>(_:)"
    #expect(after.functions.contains(admin))
    let other = crash(in: admin, executable: after.path)
    #expect(other.signature != second.signature)
    #expect(other.signatureDigest != second.signatureDigest)
  }

  @Test(arguments: [
    ("closure #3 in buildShopRouter<A>(_:)", "closure in buildShopRouter(_:)"),
    (
      "implicit closure #2 in closure #9 in Builder.crash(record:)",
      "implicit closure in closure in Builder.crash(record:)"
    ),
    ("closure #1 in Cache.lookup<Int>(_:)", "closure in Cache.lookup(_:)"),
    ("specialized closure #4 in Cache.lookup<A>(_:)", "closure in Cache.lookup(_:)"),
    ("partial apply for closure #1 in Server.run()", "closure in Server.run()"),
    ("merged Server.handle(_:)", "Server.handle(_:)"),
    ("(2) await resume partial function for closure #5 in Server.route(_:)", "closure in Server.route(_:)"),
    ("(10) suspend resume partial function for Server.route(_:)", "Server.route(_:)"),
    ("dispatch thunk of Store.load(id:)", "Store.load(id:)"),
    (
      "$defer #1 <A><A1, B1>() in Array.withUnsafeMutableBufferPointer<A, B>(_:)",
      "$defer () in Array.withUnsafeMutableBufferPointer(_:)"
    ),
    ("Dictionary<String, [Int]>.subscript.getter", "Dictionary.subscript.getter"),
    ("closure #1 in Pipeline.map<A>(_: (A) -> B)", "closure in Pipeline.map(_: (A) -> B)"),
    // What names different code stays: operators, argument labels, C and C++ names.
    ("static Money.< infix(_:_:)", "Money.< infix(_:_:)"),
    ("static Bits.<< infix(_:_:)", "Bits.<< infix(_:_:)"),
    ("default argument 1 of Server.init(port:host:)", "default argument 1 of Server.init(port:host:)"),
    ("std::vector<int>::push_back(int const&)", "std::vector<int>::push_back(int const&)"),
    ("memcpy", "memcpy"),
  ])
  func theGroupingNameDropsWhatTheCompilerNumbersOrAdds(_ function: String, _ grouped: String) {
    #expect(CrashReport.groupingName(of: function) == grouped)
  }
}
