// HexBytesTests.swift — the one hex parser (session ids, build ids): exact digits or nothing.

import Testing

@testable import CrumbsRecorder

@Suite struct HexBytesTests {
  @Test func digitsOfEitherCaseMakeBytes() {
    #expect([UInt8](hexDigits: "00aFfe7B") == [0x00, 0xAF, 0xFE, 0x7B])
  }

  @Test(arguments: ["", "abc", "+f", "0g", " 0", "0x12", "-1"])
  func anythingButPairsOfHexDigitsIsRefused(_ text: String) {
    #expect([UInt8](hexDigits: text) == nil)
  }

  @Test func aSessionIDWithASignInItsDigitsIsNotOne() {
    // `UInt8("+f", radix: 16)` is 15: a parser built on it took "+f" as a byte.
    #expect(SessionID("+f2c4245-af23-4106-8f27-b0feef27bd6a") == nil)
    let id = SessionID()
    #expect(SessionID("\(id)") == id)
    #expect(SessionID("\(id)".uppercased()) == id)
  }
}
