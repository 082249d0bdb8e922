// ThreadDumpAnswers.swift — the answers to `crumbs threads` one session keeps beside its ring
// (`<session>.threads-<cookie>.json`): written within a bound, one capture for every request
// waiting, and removed when the client closes. ThreadDumpResponder's file side, apart so the
// bound is tested without a signal. Not signal-safe.

import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

struct ThreadDumpAnswers: Sendable {
  /// How many answers may wait in the ring's folder at once: the asker deletes its own once
  /// read, so more means askers that went away (or a flood of requests).
  static let maxPresent = 4
  /// An answer older than this is abandoned (its asker notices the rename within milliseconds,
  /// reads and deletes it) and is removed before room is counted, so answers nobody took do not
  /// block later requests for longer.
  static let abandonedAfterNanoseconds: UInt64 = 30_000_000_000

  var ringPath: String
  var sessionID: SessionID

  /// Where the answer to `cookie` goes.
  func path(for cookie: UInt32) -> String {
    RingDirectory.threadDumpPath(forRing: ringPath, cookie: cookie)
  }

  /// The answers of this session present now (their temporary files not counted).
  func present() -> [String] {
    let folder = Syscall.directoryName(of: ringPath)
    let prefix = Syscall.baseName(of: RingDirectory.threadDumpPrefix(forRing: ringPath))
    let names = (try? Syscall.directoryEntries(folder)) ?? []
    return names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(".json") }.map { folder + "/" + $0 }
  }

  /// The cookies of `cookies` that may be answered now (`now`: wall ns): each whose answer is
  /// already present (replaced, not added), and new ones while fewer than `maxPresent` answers
  /// would be present, once the abandoned ones are removed.
  func withRoom(_ cookies: [UInt32], now: UInt64 = SystemClock.wallNanoseconds()) -> [UInt32] {
    var present = Set(present())
    for path in present {
      guard let modified = Syscall.status(ofPath: path)?.modifiedNanoseconds,
        now > modified, now - modified > Self.abandonedAfterNanoseconds
      else { continue }
      _ = try? Syscall.unlink(path)
      present.remove(path)
    }
    var room = Self.maxPresent - present.count
    return cookies.filter { cookie in
      if present.contains(path(for: cookie)) { return true }
      guard room > 0 else { return false }
      room -= 1
      return true
    }
  }

  /// Answers the cookies there is room for with one capture (none taken when there is no room),
  /// each in its own file, atomically. Returns how many answers were written.
  @discardableResult
  func write<Failure: Error>(
    _ cookies: [UInt32], now: UInt64 = SystemClock.wallNanoseconds(),
    capture: () throws(Failure) -> ThreadSnapshot
  ) -> Int {
    let taken = withRoom(cookies, now: now)
    guard !taken.isEmpty else { return 0 }
    var snapshot: ThreadSnapshot?
    var failure: String?
    do {
      snapshot = try capture()
    } catch {
      failure = "\(error)"
    }
    var written = 0
    for cookie in taken {
      let answer = ThreadDumpAnswer(
        pid: getpid(), sessionID: sessionID.description, cookie: cookie, snapshot: snapshot, error: failure)
      // Not durable: an answer is read within seconds or never (no fsync on the app's disk).
      guard let bytes = try? answer.encoded(),
        (try? Syscall.writeFileAtomically(path(for: cookie), bytes, durable: false)) != nil
      else { continue }
      written += 1
    }
    return written
  }

  /// Removes every answer of this session still present.
  func removeAll() {
    for path in present() { _ = try? Syscall.unlink(path) }
  }
}
