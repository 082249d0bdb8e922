// BacktraceEncodingTests.swift — a report as a Backtrace submission: multipart with the JSON
// report, the breadcrumbs file and the other attachments, the token only on the wire.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct BacktraceEncodingTests {
  @Test func backtraceSubmissionIsMultipartWithTheJSONReportAndBreadcrumbs() throws {
    let fixture = try ReportFixture(count: 2, extraAttachmentBytes: 1000)
    let server = try LoopbackHTTPServer(status: 200, body: "{\"response\":\"ok\"}")
    defer { server.stop() }
    let token = "tok/en+s3cret"
    let destination = BacktraceDestination(endpoint: server.baseURL, token: token)
    let uploader = ReportUploader(store: fixture.store, destinations: [destination])
    let pass = uploader.deliverPendingNow()
    #expect(pass.finished.count == 2 && pass.finished.allSatisfy { $0.state == .sent })
    #expect(server.requests.count == 2)

    let request = try #require(server.requests.last)  // the clone, with the extra attachment
    let report = fixture.reports[1].report
    #expect(request.target == "/post?format=json&token=tok%2Fen%2Bs3cret")
    let contentType = try #require(request.headers["content-type"])
    let boundary = try #require(contentType.components(separatedBy: "boundary=").last)
    let parts = multipartParts(request.body, boundary: boundary)
    #expect(parts.map(\.name) == ["upload_file", "attachment_bt-breadcrumbs-0", "attachment_blob.bin"])
    #expect(parts[2].body.count == 1000)

    let json = try #require(try JSONSerialization.jsonObject(with: Data(parts[0].body)) as? [String: Any])
    #expect(json["uuid"] as? String == report.id)
    #expect(json["timestamp"] as? Int == Int(report.timeUnixNano / 1_000_000_000))
    #expect(json["lang"] as? String == "swift")
    #expect(json["agent"] as? String == "crumbs")
    #expect(json["agentVersion"] as? String == CrumbsVersion.string)
    #expect((json["langVersion"] as? String)?.isEmpty == false)
    let mainThread = try #require(json["mainThread"] as? String)
    let threads = try #require(json["threads"] as? [String: Any])
    let thread = try #require(threads[mainThread] as? [String: Any])
    #expect(thread["fault"] as? Bool == true)
    #expect(thread["stack"] is [Any])
    let attributes = try #require(json["attributes"] as? [String: Any])
    #expect(attributes["error.message"] as? String == report.exceptionMessage)
    #expect(attributes["application"] as? String == report.resource["service.name"])
    #expect(attributes["crumbs.report.id"] as? String == report.id)
    for value in attributes.values { #expect(value is String || value is NSNumber) }
    #expect(json["annotations"] is [String: Any])

    let breadcrumbs = try #require(
      try JSONSerialization.jsonObject(with: Data(parts[1].body)) as? [[String: Any]])
    #expect(breadcrumbs.count == report.breadcrumbs.count)
    #expect(attributes["breadcrumbs.lastId"] as? Int == breadcrumbs.count)
    #expect(breadcrumbs.last?["id"] as? Int == breadcrumbs.count)
    #expect(breadcrumbs.first?["message"] as? String == "step 0")
    #expect(breadcrumbs.first?["type"] as? String == "manual")
    #expect(
      Set(breadcrumbs.first?.keys.map { $0 } ?? []) == [
        "id", "timestamp", "level", "type", "message", "attributes",
      ])
    #expect(!fixture.everythingStored().contains("s3cret"))
  }
}

/// The JSON body a loopback server received, checked field by field against Backtrace's crash
/// submission schema (Error Reporting API, "Submit Crash"): required fields and their types,
/// threads/mainThread, frames, arch and registers, modules, sourceCode, classifiers, attributes.
@Suite struct BacktraceSchemaTests {
  static let buildID: [UInt8] = Array(1...20)
  /// `buildID` as a Breakpad debug identifier, written out by hand: the first 16 bytes as a GUID
  /// whose first three fields are little-endian (01020304 0506 0708 → 04030201 0605 0807), then
  /// the rest as they are, upper case, age 0.
  static let debugIdentifier = "040302010605080709" + "0A0B0C0D0E0F10" + "0"

  /// A crash with a symbolicated frame, a frame in a library, a guessed caller, registers and
  /// modules, stored beside the fixture's report (same trail).
  static func crashFixture(
    change: (inout CrashReport) -> Void = { _ in }
  ) throws -> (ReportFixture, CrashReport) {
    let fixture = try ReportFixture()
    var report = fixture.reports[0].report
    report.id = SessionID().description
    report.sessionID = "5d1c3e2a-0b4f-4c6d-8e9f-0a1b2c3d4e5f"
    report.kind = .crash
    report.exceptionType = "SIGSEGV"
    report.exceptionMessage = "SIGSEGV (SEGV_MAPERR) at 0x0"
    report.threadID = 4242
    report.threadName = "worker"
    report.resource["service.version"] = "1.2.3-crashed"
    report.resource["host.arch"] = "amd64"
    report.signal = CrashReport.SignalInfo(
      number: 11, name: "SIGSEGV", code: 1, codeName: "SEGV_MAPERR", faultAddress: "0x0", senderPID: nil,
      senderUID: nil)
    report.registers = [
      .init(name: "rip", value: "0x0000555555556abc"), .init(name: "rsp", value: "0x00007ffd1c2a3b40"),
    ]
    report.modules = [
      LoadedModule(
        path: "/opt/app/bin/app", loadBias: 0x5555_5555_4000, buildID: buildID, start: 0x5555_5555_4000,
        end: 0x5555_5556_0000),
      LoadedModule(
        path: "/usr/lib/libc.so.6", loadBias: 0x7fff_f7c0_0000, buildID: [0xAA, 0xBB, 0xCC, 0xDD],
        start: 0x7fff_f7c0_0000, end: 0x7fff_f7e0_0000),
    ]
    report.frames = [
      CrashReport.Frame(
        index: 0, address: "0x555555556abc", module: "/opt/app/bin/app", moduleOffset: "0x2abc",
        buildID: LoadedModule.hex(buildID), function: "Cache.lookup(_:)",
        symbol: "App.Cache.lookup(Swift.String) -> Swift.Int", symbolOffset: 12, file: "/src/Cache.swift",
        line: 42, note: nil),
      CrashReport.Frame(
        index: 1, address: "0x7ffff7c29d90", module: "/usr/lib/libc.so.6", moduleOffset: "0x29d90",
        buildID: "aabbccdd", function: nil, symbol: nil, symbolOffset: nil, file: nil, line: nil,
        note: "stripped"),
    ]
    report.evidence = [CrashReportBuilder.stackScannedEvidence]
    change(&report)
    let trail = try Syscall.readFile(fixture.reports[0].attachmentPath(TrailAttachment.name))
    Syscall.removeTree(fixture.reports[0].path)
    _ = try fixture.store.store(report, attachments: [(TrailAttachment.name, trail)])
    return (fixture, report)
  }

  /// Sends the store's one report to a loopback Backtrace and returns the JSON body it got.
  static func sentBody(_ fixture: ReportFixture) throws -> [String: Any] {
    let server = try LoopbackHTTPServer(status: 200, body: "{\"response\":\"ok\"}")
    defer { server.stop() }
    let uploader = ReportUploader(
      store: fixture.store, destinations: [BacktraceDestination(endpoint: server.baseURL, token: "t")])
    let pass = uploader.deliverPendingNow()
    #expect(pass.finished.map(\.state) == [.sent])
    let request = try #require(server.requests.first)
    let boundary = try #require(request.headers["content-type"]?.components(separatedBy: "boundary=").last)
    let part = try #require(
      multipartParts(request.body, boundary: boundary).first { $0.name == "upload_file" })
    return try #require(try JSONSerialization.jsonObject(with: Data(part.body)) as? [String: Any])
  }

  @Test func theCrashBodyHasTheSchemasFieldsWithTheirTypes() throws {
    let (fixture, report) = try Self.crashFixture()
    let json = try Self.sentBody(fixture)

    // Required: uuid (UUID text), timestamp (integer seconds), lang, langVersion, agent,
    // agentVersion, threads (object), mainThread (a key of threads).
    #expect(UUID(uuidString: try #require(json["uuid"] as? String))?.uuidString.lowercased() == report.id)
    #expect(json["timestamp"] as? Int == Int(report.timeUnixNano / 1_000_000_000))
    for key in ["lang", "langVersion", "agent", "agentVersion"] {
      #expect((json[key] as? String)?.isEmpty == false, "\(key)")
    }
    let threads = try #require(json["threads"] as? [String: Any])
    #expect(json["mainThread"] as? String == "4242")
    #expect(threads.keys.sorted() == ["4242"])
    let thread = try #require(threads["4242"] as? [String: Any])
    #expect(thread["name"] as? String == "worker")
    #expect(thread["fault"] as? Bool == true)
    let stack = try #require(thread["stack"] as? [[String: Any]])
    try #require(stack.count == 2)
    for frame in stack { #expect(Set(frame.keys).isSubset(of: BacktraceJSON.frameKeys), "\(frame.keys)") }

    // The faulting frame: symbolicated, with its source, registers and debug identifier.
    let top = stack[0]
    #expect(top["funcName"] as? String == "Cache.lookup(_:)")
    #expect(top["symbol"] as? String == "App.Cache.lookup(Swift.String) -> Swift.Int")
    #expect(top["address"] as? String == String(UInt64(0x5555_5555_6abc)))
    #expect(top["library"] as? String == "app")
    #expect(top["debug_identifier"] as? String == Self.debugIdentifier)
    #expect(top["faulted"] as? Bool == true)
    #expect(top["guessed_frame"] as? Bool == false)
    #expect(top["line"] as? String == "42")
    let sourceID = try #require(top["sourceCode"] as? String)
    let sources = try #require(json["sourceCode"] as? [String: [String: Any]])
    #expect(sources[sourceID]?["path"] as? String == "/src/Cache.swift")
    let registers = try #require(top["registers"] as? [String: String])
    #expect(registers == ["rip": String(UInt64(0x5555_5555_6abc)), "rsp": String(UInt64(0x7ffd_1c2a_3b40))])

    // A caller found by scanning the stack, in a stripped library: named by module + offset.
    let caller = stack[1]
    #expect(caller["funcName"] as? String == "libc.so.6+0x29d90")
    #expect(caller["address"] as? String == String(UInt64(0x7fff_f7c2_9d90)))
    #expect(caller["library"] as? String == "libc.so.6")
    #expect(caller["debug_identifier"] as? String == "DDCCBBAA" + String(repeating: "0", count: 24) + "0")
    #expect(caller["guessed_frame"] as? Bool == true)
    #expect(caller["faulted"] as? Bool == false)
    #expect(caller["registers"] == nil && caller["line"] == nil && caller["sourceCode"] == nil)

    // arch: the process's architecture and a type for every register the frames carry.
    let arch = try #require(json["arch"] as? [String: Any])
    #expect(arch["name"] as? String == "x64")
    #expect(arch["registers"] as? [String: String] == ["rip": "u64", "rsp": "u64"])

    // modules: start as a decimal string, size a number, code_file, debug_file, debug_identifier.
    let modules = try #require(json["modules"] as? [[String: Any]])
    try #require(modules.count == 2)
    #expect(modules[0]["start"] as? String == String(UInt64(0x5555_5555_4000)))
    #expect(modules[0]["size"] as? Int == 0xC000)
    #expect(modules[0]["code_file"] as? String == "/opt/app/bin/app")
    #expect(modules[0]["debug_file"] as? String == "app")
    #expect(modules[0]["debug_identifier"] as? String == Self.debugIdentifier)
    #expect(modules[1]["size"] as? Int == 0x20_0000)
    for module in modules {
      #expect(Set(module.keys) == ["start", "size", "code_file", "debug_file", "debug_identifier"])
    }

    #expect(json["classifiers"] as? [String] == ["SIGSEGV"])
    let attributes = try #require(json["attributes"] as? [String: Any])
    for (key, value) in attributes {
      #expect(value is String || value is NSNumber, "\(key) is \(type(of: value))")
    }
    #expect(attributes["error.type"] as? String == "Crash")
    #expect(attributes["error.message"] as? String == report.exceptionMessage)
    #expect(attributes["application.version"] as? String == "1.2.3-crashed")
    #expect(attributes["application.session"] as? String == report.sessionID)
    #expect(attributes["application"] as? String == report.resource["service.name"])
    let guid = try #require(attributes["guid"] as? String)
    #expect(UUID(uuidString: guid) != nil)
    #expect(guid != report.resource["host.name"])
    #expect(attributes["uname.sysname"] as? String == "Linux")
    #expect(json["annotations"] is [String: Any])
  }

  @Test func aHangIsAHangWithItsClassifier() throws {
    let (fixture, report) = try Self.crashFixture { report in
      report.kind = .hang
      report.exceptionType = HangFacts.exceptionType
      report.signal = nil
      report.registers = []
    }
    let json = try Self.sentBody(fixture)
    let attributes = try #require(json["attributes"] as? [String: Any])
    #expect(attributes["error.type"] as? String == "Hang")
    #expect(attributes["error.message"] as? String == report.exceptionMessage)
    #expect(json["classifiers"] as? [String] == ["Hang"])
  }

  @Test func aLikelyOutOfMemoryEndIsLowMemoryAndUnguessedWithoutScanning() throws {
    let (fixture, report) = try Self.crashFixture { report in
      report.kind = .abnormalTermination
      report.exceptionType = "OutOfMemory"
      report.signal = nil
      report.registers = []
      report.evidence = ["the cgroup's memory.events oom_kill count rose"]
    }
    let json = try Self.sentBody(fixture)
    let attributes = try #require(json["attributes"] as? [String: Any])
    #expect(attributes["error.type"] as? String == "Low Memory")
    #expect(json["classifiers"] as? [String] == ["OutOfMemory"])
    #expect(json["arch"] == nil)
    let thread = try #require(
      (json["threads"] as? [String: Any])?[json["mainThread"] as? String ?? ""] as? [String: Any])
    let stack = try #require(thread["stack"] as? [[String: Any]])
    // Not a crash: no frame faulted; not scanned: none guessed.
    #expect(stack.allSatisfy { $0["faulted"] as? Bool == false && $0["guessed_frame"] as? Bool == false })
    #expect(attributes["application.session"] as? String == report.sessionID)
  }
}
