// ThreadDumpAnswer.swift — the file a running process writes next to its ring to answer
// `crumbs threads PID` (`rings/<session>.threads-<cookie>.json`, RingDirectory.threadDumpPath),
// and its reader, which trusts nothing in it: it comes from another process.
//
// Format: one JSON object, `{"format":"crumbs.thread_dump","version":1,"pid":…,"session.id":…,
// "cookie":…,"snapshot":{…}}`, the snapshot being the live capture's Codable `ThreadSnapshot`
// (every thread's registers and return addresses, and the modules that name them), or
// `"error":"…"` instead when the capture failed. Addresses, not names: the asker symbolicates
// (`threads(options:)`), so the answering process spends only the capture.
//
// Entry points, in call order:
//   ThreadDumpAnswer(…).encoded()     the answering client (ThreadDumpResponder)
//   ThreadDumpAnswer.decode(_:)       the asker; a clear error for anything but a whole answer
//                                     within the bounds below, never a trap (Fuzz/ThreadDump)
//   answer.threads(options:)          the report's threads, symbolicated with its modules
// Not signal-safe.

import CrumbsRecorder
import FoundationEssentials

/// Why bytes are not a thread-dump answer.
package enum ThreadDumpAnswerError: Error, Equatable, CustomStringConvertible {
  /// Not JSON, or a field missing or of the wrong type.
  case damaged(String)
  /// Another format, or a version this reader does not know.
  case unsupported(String)
  /// Whole, but past a bound (more threads, frames or modules than any capture writes).
  case outOfBounds(String)

  package var description: String {
    switch self {
    case .damaged(let reason): "damaged: \(reason)"
    case .unsupported(let reason): "unsupported: \(reason)"
    case .outOfBounds(let reason): "out of bounds: \(reason)"
    }
  }
}

/// One answer to one request.
package struct ThreadDumpAnswer: Codable, Sendable, Equatable {
  package static let formatName = "crumbs.thread_dump"
  package static let currentVersion = 1
  /// Bounds a reader enforces (a capture stays far inside them).
  package static let maxThreads = 65_536
  package static let maxFramesPerThread = 4_096
  package static let maxModules = 65_536

  package var format = Self.formatName
  package var version = Self.currentVersion
  /// The answering process (as its own pid namespace numbers it).
  package var pid: Int32
  package var sessionID: String
  /// The request's cookie (the sigqueue value; 0 for a plain kill).
  package var cookie: UInt32
  /// The capture; nil when it failed (`error`).
  package var snapshot: ThreadSnapshot?
  /// Why there is no capture.
  package var error: String?

  enum CodingKeys: String, CodingKey {
    case format, version, pid, cookie, snapshot, error
    case sessionID = "session.id"
  }

  package init(pid: Int32, sessionID: String, cookie: UInt32, snapshot: ThreadSnapshot?, error: String?) {
    self.pid = pid
    self.sessionID = sessionID
    self.cookie = cookie
    self.snapshot = snapshot
    self.error = error
  }

  /// When the capture was taken (wall ns since the Unix epoch; 0 without one).
  package var wallNanoseconds: UInt64 { snapshot?.wallNanoseconds ?? 0 }
  /// The longest any thread stayed paused by the capture (0 without one).
  package var longestPauseNanoseconds: UInt64 { snapshot?.longestPauseNanoseconds ?? 0 }

  /// The answer as the file holds it.
  package func encoded() throws(ThreadDumpAnswerError) -> [UInt8] {
    do {
      return Array(try JSONEncoder().encode(self))
    } catch {
      throw .damaged("cannot encode: \(error)")
    }
  }

  /// Reads an answer from untrusted bytes: whole and within bounds, or a clear error.
  package static func decode(_ bytes: [UInt8]) throws(ThreadDumpAnswerError) -> ThreadDumpAnswer {
    // The format first, alone: a file of another format or version says so, not which of the
    // fields it lacks.
    struct Envelope: Decodable {
      var format: String
      var version: Int
    }
    let data = Data(bytes)
    let envelope: Envelope
    do {
      envelope = try JSONDecoder().decode(Envelope.self, from: data)
    } catch {
      throw .damaged(Self.reason(error))
    }
    guard envelope.format == formatName else { throw .unsupported("format \(jsonQuoted(envelope.format))") }
    guard envelope.version == currentVersion else {
      throw .unsupported(
        "version \(envelope.version) (this crumbs reads \(currentVersion)\(envelope.version > currentVersion ? "; use a newer crumbs" : ""))"
      )
    }
    let answer: ThreadDumpAnswer
    do {
      answer = try JSONDecoder().decode(ThreadDumpAnswer.self, from: data)
    } catch {
      throw .damaged(Self.reason(error))
    }
    if let snapshot = answer.snapshot {
      guard snapshot.table.threads.count <= maxThreads else {
        throw .outOfBounds("\(snapshot.table.threads.count) threads")
      }
      guard snapshot.modules.count <= maxModules else {
        throw .outOfBounds("\(snapshot.modules.count) modules")
      }
      for thread in snapshot.table.threads where thread.frames.count > maxFramesPerThread {
        throw .outOfBounds("thread \(thread.id) has \(thread.frames.count) frames")
      }
      // One wait a thread at most, six arguments each: the verdict walks them.
      if let waits = snapshot.waits?.threads {
        guard waits.count <= maxThreads else { throw .outOfBounds("\(waits.count) waits") }
        for wait in waits where (wait.arguments?.count ?? 0) > 6 {
          throw .outOfBounds("thread \(wait.threadID) has \(wait.arguments?.count ?? 0) arguments")
        }
      }
    } else if answer.error == nil {
      throw .damaged("neither a snapshot nor an error")
    }
    return answer
  }

  /// A decoding error in one line: what is wrong and where (not the decoder's whole context).
  private static func reason(_ error: any Error) -> String {
    guard let error = error as? DecodingError else { return "not JSON" }
    func path(_ context: DecodingError.Context) -> String {
      let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
      return keys.isEmpty ? "the top level" : keys.joined(separator: ".")
    }
    switch error {
    case .dataCorrupted(let context):
      return context.codingPath.isEmpty ? "not JSON" : "bad value at \(path(context))"
    case .keyNotFound(let key, let context):
      return "no \(key.stringValue) at \(path(context))"
    case .typeMismatch(_, let context), .valueNotFound(_, let context):
      return "wrong type at \(path(context))"
    @unknown default: return "not a thread dump"
    }
  }

  /// The snapshot's threads as a report holds them, named with the snapshot's modules and
  /// `options` (file and line through llvm-symbolizer when it asks for them). Empty without a
  /// snapshot.
  package func threads(options: Symbolicator.Options) -> [CrashReport.Thread] {
    guard let snapshot else { return [] }
    let symbolicator = Symbolicator(modules: snapshot.modules, options: options)
    return CrashReportBuilder.threads(of: snapshot, symbolicator: symbolicator)
  }
}
