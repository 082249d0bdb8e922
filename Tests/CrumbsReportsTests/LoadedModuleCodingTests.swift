// LoadedModuleCodingTests.swift — the one module type, as a stored report writes and reads it:
// hex addresses and build ID, round trips exactly, and reports stored before the address
// ranges were added still load.

import CrumbsPlatform
import Foundation
import Testing

@testable import CrumbsRecorder
@testable import CrumbsReports

@Suite struct LoadedModuleCodingTests {
  let module = LoadedModule(
    path: "/usr/lib/libapp.so", loadBias: 0x7f12_3400_0000, buildID: [0xab, 0x01, 0xff],
    start: 0x7f12_3400_0000,
    end: 0x7f12_3401_0000, textStart: 0x7f12_3400_1000, textEnd: 0xFFFF_FFFF_FFFF_FFFF)

  @Test func encodesHexAndRoundTripsExactly() throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let text = String(decoding: try encoder.encode(module), as: UTF8.self)
    #expect(
      text
        == #"{"buildID":"ab01ff","end":"0x7f1234010000","loadAddress":"0x7f1234000000","path":"/usr/lib/libapp.so","#
        + #""start":"0x7f1234000000","textEnd":"0xffffffffffffffff","textStart":"0x7f1234001000"}"#)
    #expect(try JSONDecoder().decode(LoadedModule.self, from: Data(text.utf8)) == module)

    var unknown = module
    unknown.buildID = []
    let withoutBuildID = try encoder.encode(unknown)
    #expect(!String(decoding: withoutBuildID, as: UTF8.self).contains("buildID"))
    #expect(try JSONDecoder().decode(LoadedModule.self, from: withoutBuildID) == unknown)
  }

  @Test func aModuleStoredBeforeAddressRangesDecodesWithZeros() throws {
    let old = #"{"path":"/bin/x","loadAddress":"0x400000","buildID":"00c0ffee"}"#
    let decoded = try JSONDecoder().decode(LoadedModule.self, from: Data(old.utf8))
    #expect(
      decoded
        == LoadedModule(
          path: "/bin/x", loadBias: 0x40_0000, buildID: [0x00, 0xc0, 0xff, 0xee], start: 0, end: 0))
  }

  @Test(arguments: [
    #"{"path":"/bin/x","loadAddress":"400000"}"#, #"{"path":"/bin/x","loadAddress":"0xzz"}"#,
    #"{"path":"/bin/x","loadAddress":"0x1","buildID":"abc"}"#,
    #"{"path":"/bin/x","loadAddress":"0x1","buildID":"zz"}"#, #"{"loadAddress":"0x1"}"#,
  ])
  func malformedFieldsAreDecodingErrors(json: String) {
    #expect(throws: DecodingError.self) { try JSONDecoder().decode(LoadedModule.self, from: Data(json.utf8)) }
  }

  @Test func theFuzzCorpusReportFromBeforeStillLoads() throws {
    let path =
      String(#filePath.dropLast("Tests/CrumbsReportsTests/LoadedModuleCodingTests.swift".count))
      + "Fuzz/Corpus/stored-report/report.json"
    let report = try ReportStore.decode(try Syscall.readFile(path))
    #expect(report.modules == [LoadedModule(path: "/bin/x", loadBias: 0, buildID: [], start: 0, end: 0)])
  }
}
