import CrumbsPlatform
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct LZ4FrameTests {
  @Test func roundTripsAndTheLZ4CLIReadsIt() throws {
    let directory = TestDirectory()
    let text = (0..<2000).map { "{\"n\":\($0),\"message\":\"GET /v1/cart → 200\"}\n" }.joined()
    let compressed = try LZ4Frame.compress(Array(text.utf8))
    #expect(Array(compressed.prefix(4)) == [0x04, 0x22, 0x4d, 0x18])  // LZ4 frame magic
    #expect(compressed.count < text.utf8.count / 4)
    #expect(try LZ4Frame.decompress(compressed) == Array(text.utf8))
    try Syscall.writeFileAtomically(directory.file("t.lz4"), compressed)
    #expect(try runLZ4Decompress(directory.file("t.lz4")) == text)  // byte for byte, final newline included
  }

  @Test func readsWhatTheLZ4CLIWrote() throws {
    let directory = TestDirectory()
    let original = Array((0..<100_000).map { UInt8(truncatingIfNeeded: $0 % 251) })
    try Syscall.writeFileAtomically(directory.file("plain"), original)
    let child = try ChildProcess(
      "/usr/bin/lz4", ["-q", "-f", directory.file("plain"), directory.file("plain.lz4")])
    child.wait()
    #expect(child.exitCode == 0)
    #expect(try LZ4Frame.decompress(try Syscall.readFile(directory.file("plain.lz4"))) == original)
  }

  @Test func truncatedOrForeignInputIsAnError() throws {
    let compressed = try LZ4Frame.compress(Array(repeating: 7, count: 10_000))
    #expect(throws: LZ4Error.self) { try LZ4Frame.decompress(Array(compressed.dropLast(3))) }
    #expect(throws: LZ4Error.self) { try LZ4Frame.decompress(Array("not lz4 at all".utf8)) }
    #expect(throws: LZ4Error.self) { try LZ4Frame.decompress([]) }
    #expect(throws: LZ4Error.self) {
      try LZ4Frame.decompress(
        Array(repeating: 0, count: 100_000).withUnsafeBufferPointer { _ in compressed }, limit: 100)
    }
  }
}
