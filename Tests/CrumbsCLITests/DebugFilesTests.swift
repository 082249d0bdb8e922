// DebugFilesTests.swift — `crumbs debug-files list|upload` on real ELF files made in the test
// (the test child binary, a stripped copy pointing at its .debug file, that .debug file), the
// upload against a loopback server playing Backtrace's symbol endpoint.

import CrumbsDeliveryTestSupport
import CrumbsPlatform
import CrumbsTestSupport
import Foundation
import Testing

@testable import CrumbsDelivery
@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct DebugFilesTests {
  /// `bin/app` (stripped, with a .gnu_debuglink to app.debug), `debug/app.debug` (only the debug
  /// info), `unstripped/app-full` (the test child as built), and a text file.
  struct Tree {
    let directory = TestDirectory()
    let buildID: String
    var stripped: String { directory.file("bin/app") }
    var debugFile: String { directory.file("debug/app.debug") }
    var unstripped: String { directory.file("unstripped/app-full") }

    init() throws {
      for folder in ["bin", "debug", "unstripped"] { try Syscall.makeDirectory(directory.file(folder)) }
      buildID = LoadedModule.hex(try ELFImage.read(path: ChildProcess.testChild, symbols: false).buildID)
      let debugFile = directory.file("debug/app.debug")
      let steps: [(String, [String])] = [
        ("/usr/bin/objcopy", ["--only-keep-debug", ChildProcess.testChild, debugFile]),
        ("/usr/bin/strip", ["-s", ChildProcess.testChild, "-o", directory.file("bin/app")]),
        ("/usr/bin/objcopy", ["--add-gnu-debuglink=" + debugFile, directory.file("bin/app")]),
        ("/bin/cp", [ChildProcess.testChild, directory.file("unstripped/app-full")]),
      ]
      for (tool, arguments) in steps {
        let result = try Subprocess.run(tool, arguments, timeoutMilliseconds: 120_000)
        #expect(
          result.exitStatus == 0,
          "\(tool) \(arguments): \(String(decoding: result.standardError, as: UTF8.self))")
      }
      try Syscall.writeFileAtomically(directory.file("bin/README"), Array("not ELF".utf8), durable: false)
    }
  }

  @Test func listNamesEveryELFFileWithItsBuildIDDebugInfoAndDebugLink() throws {
    let tree = try Tree()
    #expect(tree.buildID.count == 40)
    let list = try CLIProcess.run(["debug-files", "list", tree.directory.path, "--json"])
    #expect(list.status == 0, "\(list.stderr)")
    let files = try #require(
      try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
    let byPath = Dictionary(uniqueKeysWithValues: files.map { ($0["path"] as? String ?? "", $0) })
    #expect(Set(byPath.keys) == [tree.stripped, tree.debugFile, tree.unstripped])
    for file in files {
      #expect(file["build_id"] as? String == tree.buildID)
      #expect(
        file["debug_identifier"] as? String == BacktraceJSON.debugIdentifier(hex: tree.buildID))
    }
    #expect(byPath[tree.stripped]?["has_debug_info"] as? Bool == false)
    #expect(byPath[tree.stripped]?["debug_link"] as? String == "app.debug")
    #expect(byPath[tree.debugFile]?["has_debug_info"] as? Bool == true)
    #expect(byPath[tree.unstripped]?["has_debug_info"] as? Bool == true)
    #expect(byPath[tree.unstripped]?["debug_link"] == nil)

    let text = try CLIProcess.run(["debug-files", "list", tree.directory.file("bin")])
    #expect(text.status == 0)
    #expect(text.stdoutLines == ["\(tree.buildID)  no-debug-info  \(tree.stripped)  (debuglink app.debug)"])

    let missing = try CLIProcess.run(["debug-files", "list", tree.directory.file("nope")])
    #expect(missing.status == 1)
    #expect(missing.stderr.contains("no such file or directory"))
  }

  @Test func uploadSendsEachFileWithDebugInfoOnceToTheSymbolEndpoint() throws {
    let tree = try Tree()
    let server = try LoopbackHTTPServer(status: 200, body: "{\"response\":\"ok\"}")
    defer { server.stop() }
    let tokenFile = tree.directory.file("token")
    try Syscall.writeFileAtomically(tokenFile, Array("sym+t0ken\n".utf8), durable: false)
    let upload = try CLIProcess.run([
      "debug-files", "upload", "--backtrace", server.baseURL + "/", "--token-file", tokenFile, "--tag",
      "1.2.3",
      tree.directory.path,
    ])
    #expect(upload.status == 0, "\(upload.stdout)\(upload.stderr)")
    // debug/app.debug comes first in the walk; app-full has the same build ID: sent once. The
    // stripped binary has no debug info.
    #expect(server.requests.count == 1)
    let request = try #require(server.requests.first)
    #expect(request.method == "POST")
    #expect(request.target == "/post?format=symbols&token=sym%2Bt0ken&upload_file=app&tag=1.2.3")
    #expect(request.headers["content-type"] == "application/octet-stream")
    #expect(request.body == (try Syscall.readFile(tree.debugFile)))
    #expect(upload.stdoutLines.first == "[1/1] uploaded app (\(tree.buildID)) from \(tree.debugFile) → 200")
    #expect(upload.stdoutLines.last?.hasPrefix("1 uploaded, 0 failed, 2 skipped") == true, "\(upload.stdout)")
    #expect(!(upload.stdout + upload.stderr).contains("t0ken"))

    // The unstripped binary alone: uploaded under its own name.
    let alone = try CLIProcess.run([
      "debug-files", "upload", "--backtrace", server.baseURL, "--token-file", tokenFile, "--json",
      tree.unstripped,
    ])
    #expect(alone.status == 0)
    #expect(server.requests.last?.target == "/post?format=symbols&token=sym%2Bt0ken&upload_file=app-full")
    let summary = try #require(
      try JSONSerialization.jsonObject(with: Data(alone.stdout.utf8)) as? [String: Any])
    #expect(summary["uploaded"] as? Int == 1 && summary["failed"] as? Int == 0)

    // Only stripped files: nothing to upload.
    let none = try CLIProcess.run([
      "debug-files", "upload", "--backtrace", server.baseURL, "--token-file", tokenFile, tree.stripped,
    ])
    #expect(none.status == 3)
    #expect(none.stderr.contains("no file with debug info found"))
  }

  @Test func uploadRetriesWhatTheUploaderRetriesAndStopsAtARefusal() throws {
    let tree = try Tree()
    // 503 with Retry-After, then 500, then accepted.
    let flaky = try LoopbackHTTPServer { index, _ in
      switch index {
      case 0: .respond(503, headers: ["Retry-After": "0"])
      case 1: .respond(500)
      default: .respond(200)
      }
    }
    defer { flaky.stop() }
    let uploaded = try Subprocess.run(
      CLIProcess.executable,
      [
        "debug-files", "upload", "--backtrace", flaky.baseURL, "--retry-interval", "0", "--json",
        tree.unstripped,
      ],
      environment: ["CRUMBS_BACKTRACE_TOKEN": "env-t0ken"], timeoutMilliseconds: 120_000)
    #expect(uploaded.exitStatus == 0)
    #expect(flaky.requests.count == 3)
    #expect(flaky.requests.allSatisfy { $0.target.contains("token=env-t0ken") })
    let summary = try #require(
      try JSONSerialization.jsonObject(with: Data(uploaded.standardOutput)) as? [String: Any])
    let file = try #require((summary["files"] as? [[String: Any]])?.first)
    #expect(
      file["attempts"] as? Int == 3 && file["uploaded"] as? Bool == true && file["status"] as? Int == 200)

    // A wrong token: refused at once, the token not in the reason, exit 1.
    let refusing = try LoopbackHTTPServer(status: 403, body: "invalid token env-t0ken")
    defer { refusing.stop() }
    let refused = try Subprocess.run(
      CLIProcess.executable,
      ["debug-files", "upload", "--backtrace", refusing.baseURL, "--retry-interval", "0", tree.unstripped],
      environment: ["CRUMBS_BACKTRACE_TOKEN": "env-t0ken"], timeoutMilliseconds: 120_000)
    #expect(refused.exitStatus == 1)
    #expect(refusing.requests.count == 1)
    let output = String(decoding: refused.standardOutput + refused.standardError, as: UTF8.self)
    #expect(output.contains("failed app-full") && output.contains("HTTP 403"), "\(output)")
    #expect(!output.contains("t0ken"), "\(output)")

    // Never answered: retried to the limit, then failed.
    let gone = try Subprocess.run(
      CLIProcess.executable,
      [
        "debug-files", "upload", "--backtrace", "http://127.0.0.1:\(refusedPort())", "--retry-interval", "0",
        "--retry-limit", "2", "--json", tree.unstripped,
      ],
      environment: ["CRUMBS_BACKTRACE_TOKEN": "t"], timeoutMilliseconds: 120_000)
    #expect(gone.exitStatus == 1)
    let goneSummary = try #require(
      try JSONSerialization.jsonObject(with: Data(gone.standardOutput)) as? [String: Any])
    let goneFile = try #require((goneSummary["files"] as? [[String: Any]])?.first)
    #expect(goneFile["attempts"] as? Int == 2)
    #expect((goneFile["error"] as? String)?.contains("cannot connect") == true, "\(goneFile)")

    // No token anywhere: a usage error, nothing sent.
    let noToken = try CLIProcess.run([
      "debug-files", "upload", "--backtrace", refusing.baseURL, tree.unstripped,
    ])
    #expect(noToken.status == 64)
    #expect(refusing.requests.count == 1)
  }
}
