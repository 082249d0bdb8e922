import CrumbsSignalPath
import CrumbsTestSupport
import Testing

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct RingEncodingTests {
  @Test func levelAndTypeRawValuesMatchTheCEnums() {
    #expect(BreadcrumbLevel.debug.rawValue == UInt8(CRUMBS_LEVEL_DEBUG.rawValue))
    #expect(BreadcrumbLevel.info.rawValue == UInt8(CRUMBS_LEVEL_INFO.rawValue))
    #expect(BreadcrumbLevel.warning.rawValue == UInt8(CRUMBS_LEVEL_WARNING.rawValue))
    #expect(BreadcrumbLevel.error.rawValue == UInt8(CRUMBS_LEVEL_ERROR.rawValue))
    #expect(BreadcrumbLevel.fatal.rawValue == UInt8(CRUMBS_LEVEL_FATAL.rawValue))
    #expect(BreadcrumbLevel.allCases.count == Int(CRUMBS_LEVEL_COUNT))
    #expect(BreadcrumbType.manual.rawValue == UInt8(CRUMBS_TYPE_MANUAL.rawValue))
    #expect(BreadcrumbType.log.rawValue == UInt8(CRUMBS_TYPE_LOG.rawValue))
    #expect(BreadcrumbType.navigation.rawValue == UInt8(CRUMBS_TYPE_NAVIGATION.rawValue))
    #expect(BreadcrumbType.http.rawValue == UInt8(CRUMBS_TYPE_HTTP.rawValue))
    #expect(BreadcrumbType.system.rawValue == UInt8(CRUMBS_TYPE_SYSTEM.rawValue))
    #expect(BreadcrumbType.user.rawValue == UInt8(CRUMBS_TYPE_USER.rawValue))
    #expect(BreadcrumbType.configuration.rawValue == UInt8(CRUMBS_TYPE_CONFIGURATION.rawValue))
    #expect(BreadcrumbType.allCases.count == Int(CRUMBS_TYPE_COUNT))
  }

  @Test func longMessageIsCutAtACharacterBoundaryAndFlagged() throws {
    let directory = TestDirectory()
    var options = RingOptions()
    options.slotSize = 128
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"), options: options)
    // 200 two-byte characters: any cut at an odd byte count would split one.
    let message = String(repeating: "é", count: 200)
    ring.append(message)
    let crumb = try #require(ring.snapshot().breadcrumbs.first)
    #expect(crumb.messageTruncated)
    #expect(!crumb.attributesTruncated)
    #expect(crumb.message.utf8.count <= 128 - 36)
    #expect(crumb.message.utf8.count >= 128 - 36 - 1)
    #expect(message.hasPrefix(crumb.message))
    #expect(crumb.message.allSatisfy { $0 == "é" })
  }

  @Test func messageThatFitsIsNotFlagged() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    ring.append("GET /api/v1/users/42 → 200 in 12 ms (cache miss, 3 rows)", attributes: ["k": "v"])
    let crumb = try #require(ring.snapshot().breadcrumbs.first)
    #expect(crumb.message == "GET /api/v1/users/42 → 200 in 12 ms (cache miss, 3 rows)")
    #expect(!crumb.truncated)
  }

  @Test func attributesThatDoNotFitAreCutOrDroppedAndFlagged() throws {
    let directory = TestDirectory()
    var options = RingOptions()
    options.slotSize = 128
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"), options: options)
    ring.append(
      "short", attributes: ["first": "1", "long": String(repeating: "x", count: 300), "third": "3"])
    let crumb = try #require(ring.snapshot().breadcrumbs.first)
    #expect(crumb.message == "short")
    #expect(!crumb.messageTruncated)
    #expect(crumb.attributesTruncated)
    #expect(crumb.attributes.first == .init(key: "first", value: "1"))
    #expect(crumb.attributes.count >= 2)
    #expect(crumb.attributes[1].key == "long")
    #expect(crumb.attributes[1].value.allSatisfy { $0 == "x" })
    #expect(crumb.attributes[1].value.count < 300)
  }

  @Test func aKeyLongerThan255BytesIsCutAtACharacterBoundary() throws {
    // Issue 11 item 15: the key was clamped to 255 bytes before the boundary step, which then
    // returned at once: 200 "é" (400 bytes) came back as 127 "é" and half of one.
    let directory = TestDirectory()
    var options = RingOptions()
    options.slotSize = 1024
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"), options: options)
    let key = String(repeating: "é", count: 200)
    ring.append("long key", attributes: [key: "v"])
    let crumb = try #require(ring.snapshot().breadcrumbs.first)
    let kept = try #require(crumb.attributes.first)
    #expect(crumb.attributesTruncated)
    #expect(kept.key.utf8.count == 254)
    #expect(kept.key.allSatisfy { $0 == "é" }, "\(kept.key.unicodeScalars.suffix(2).map(\.value))")
    #expect(kept.value == "v")
  }

  @Test func invalidUTF8FromTheCEntryIsRepairedAndFlagged() throws {
    // Issue 11 item 15: bytes that are not UTF-8 come back with U+FFFD, and the breadcrumb says
    // it is not what was appended.
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
      ring.install()
      defer { ring.close() }
      let bad: [CChar] = [0x6F, 0x6B, CChar(bitPattern: 0xFF), CChar(bitPattern: 0xC3), 0]
      let good: [CChar] = [0x6B, 0]
      let appended = bad.withUnsafeBufferPointer { bad in
        good.withUnsafeBufferPointer { good in
          var attributes = [
            crumbs_attribute(key: good.baseAddress, value: good.baseAddress),
            crumbs_attribute(key: good.baseAddress, value: bad.baseAddress),
          ]
          return crumbs_add_breadcrumb(
            UInt8(CRUMBS_LEVEL_INFO.rawValue), UInt8(CRUMBS_TYPE_SYSTEM.rawValue), bad.baseAddress,
            &attributes, 2)
        }
      }
      #expect(appended)
      let crumb = try #require(ring.snapshot().breadcrumbs.first)
      #expect(crumb.message == "ok\u{FFFD}\u{FFFD}")
      #expect(crumb.messageTruncated)
      #expect(crumb.attributes.map(\.value) == ["k", "ok\u{FFFD}\u{FFFD}"])
      #expect(crumb.attributesTruncated)

      ring.append("plain", attributes: ["k": "v"])
      let plain = try #require(ring.snapshot().breadcrumbs.last)
      #expect(!plain.truncated)
    }
  }

  @Test func atMostSixteenAttributesAreKept() throws {
    let directory = TestDirectory()
    var options = RingOptions()
    options.slotSize = 1024
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"), options: options)
    let pairs: BreadcrumbAttributes = [
      "a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8", "i": "9",
      "j": "10", "k": "11", "l": "12", "m": "13", "n": "14", "o": "15", "p": "16", "q": "17",
    ]
    ring.append("many", attributes: pairs)
    let crumb = try #require(ring.snapshot().breadcrumbs.first)
    #expect(crumb.attributes.count == 16)
    #expect(crumb.attributes.last == .init(key: "p", value: "16"))
    #expect(crumb.attributesTruncated)
  }

  @Test func minimumLevelAndTypeFiltersDropAtAppendTime() throws {
    let directory = TestDirectory()
    var options = RingOptions()
    options.minimumLevel = .info
    options.enabledTypes = [.http, .user]
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"), options: options)
    ring.append("debug http", level: .debug, type: .http)
    ring.append("info http", level: .info, type: .http)
    ring.append("info log", level: .info, type: .log)
    ring.append("error user", level: .error, type: .user)
    #expect(ring.snapshot().breadcrumbs.map(\.message) == ["info http", "error user"])
    ring.setFilter(minimumLevel: .debug, enabledTypes: [])
    ring.append("nothing passes an empty set", level: .fatal, type: .http)
    #expect(ring.snapshot().breadcrumbs.count == 2)
    ring.setFilter(minimumLevel: .debug, enabledTypes: nil)
    ring.append("all pass again", level: .debug, type: .log)
    #expect(ring.snapshot().breadcrumbs.last?.message == "all pass again")
  }

  @Test func globalAddBreadcrumbWritesToTheInstalledRingOnly() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
      let other = try BreadcrumbRing.create(at: directory.file("o.ring"))
      ring.install()
      #expect(ring.isInstalled)
      ring.install()  // idempotent
      addBreadcrumb("through the global", level: .warning, type: .user, attributes: ["a": "b"])
      #expect(ring.snapshot().breadcrumbs.map(\.message) == ["through the global"])
      #expect(other.snapshot().breadcrumbs.isEmpty)
      ring.close()
      #expect(!ring.isInstalled)
      addBreadcrumb("after close: dropped, no crash")
      #expect(other.snapshot().breadcrumbs.isEmpty)
    }
  }

  @Test func cEntryPointAppendsWithAttributes() throws {
    try ProcessWideState.exclusive {
      let directory = TestDirectory()
      let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
      ring.install()
      defer { ring.close() }
      let appended = "key".withCString { key in
        "value".withCString { value in
          var attribute = crumbs_attribute(key: key, value: value)
          return crumbs_add_breadcrumb(
            UInt8(CRUMBS_LEVEL_ERROR.rawValue), UInt8(CRUMBS_TYPE_SYSTEM.rawValue), "from C", &attribute, 1)
        }
      }
      #expect(appended)
      let crumb = try #require(ring.snapshot().breadcrumbs.first)
      #expect(crumb.message == "from C")
      #expect(crumb.level == .error)
      #expect(crumb.type == .system)
      #expect(crumb.attributes == [.init(key: "key", value: "value")])
    }
  }

  @Test func timestampsAreCloseToTheWallClock() throws {
    let directory = TestDirectory()
    let ring = try BreadcrumbRing.create(at: directory.file("r.ring"))
    let before = wallNow()
    ring.append("now")
    let after = wallNow()
    let contents = ring.snapshot()
    let crumb = try #require(contents.breadcrumbs.first)
    #expect(contents.timesAreCalibrated)
    // Calibration error allowance: 50 ms either side.
    #expect(crumb.wallTimeNanoseconds + 50_000_000 >= before)
    #expect(crumb.wallTimeNanoseconds <= after + 50_000_000)
  }

  @Test func invalidOptionsAreTypedErrors() {
    let directory = TestDirectory()
    var options = RingOptions()
    options.slotSize = 100
    #expect(throws: RingCreationError.self) {
      try BreadcrumbRing.create(at: directory.file("a.ring"), options: options)
    }
    options.slotSize = 256
    options.slotCount = 10
    #expect(throws: RingCreationError.self) {
      try BreadcrumbRing.create(at: directory.file("b.ring"), options: options)
    }
    #expect(throws: RingCreationError.self) {
      try BreadcrumbRing.create(at: directory.file("no/such/dir/c.ring"))
    }
  }
}

func wallNow() -> UInt64 {
  var time = timespec()
  clock_gettime(CLOCK_REALTIME, &time)
  return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
