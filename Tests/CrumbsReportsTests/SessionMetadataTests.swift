import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

/// The session file: what the next launch reads back, and its size bound.
struct SessionMetadataTests {
  @Test func whatIsWrittenIsReadBack() throws {
    let directory = TestDirectory()
    var metadata = SessionMetadata(sessionID: SessionID(), appVersion: "1.0 \"beta\"\n")
    metadata.attributes = ["region": "eu-west-1", "path": "/a/b\\c", "control": "\u{1}\u{7F}"]
    metadata.attachments = ["/var/log/app.log", "/tmp/ünïcode.txt"]
    metadata.replacedCrashSignals = ["SIGSEGV", "SIGABRT"]
    let file = directory.file("s.session.json")
    try Syscall.writeFileAtomically(file, metadata.encoded())
    #expect(try SessionMetadata.read(file: file) == metadata)
  }

  @Test func attributesAndAttachmentsBeyondTheLimitAreLeftOutAndCounted() throws {
    let directory = TestDirectory()
    var metadata = SessionMetadata(sessionID: SessionID(), appVersion: "2.0")
    let value = String(repeating: "v", count: 1000)
    for index in 0..<100 { metadata.attributes["key\(index)"] = .string(value) }
    metadata.attachments = (0..<10).map { "/logs/\($0).log" }
    let bytes = metadata.encoded()
    #expect(bytes.count <= SessionMetadata.maxFileSize)
    let file = directory.file("s.session.json")
    try Syscall.writeFileAtomically(file, bytes)
    let read = try SessionMetadata.read(file: file)
    #expect(read.appVersion == "2.0")
    #expect(read.attributes.count > 50)
    #expect(read.attributes.count + read.attachments.count + read.omitted == 110)
    #expect(read.omitted > 0)
    #expect(read.attributes.values.allSatisfy { $0 == .string(value) })
  }

  @Test func aDamagedOrNewerFileIsAnErrorWithItsReason() throws {
    let directory = TestDirectory()
    let torn = directory.file("torn.session.json")
    try Syscall.writeFileAtomically(torn, Array("{\"format\":1,\"sessionID\":".utf8))
    #expect(throws: SessionMetadata.ReadError.self) { try SessionMetadata.read(file: torn) }
    var newer = SessionMetadata(sessionID: SessionID(), appVersion: nil)
    newer.format = SessionMetadata.currentFormat + 1
    let future = directory.file("future.session.json")
    try Syscall.writeFileAtomically(future, newer.encoded())
    do {
      _ = try SessionMetadata.read(file: future)
      Issue.record("a newer format was read")
    } catch {
      #expect(error.reason.contains("newer"))
    }
  }
}
