import Foundation

@testable import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// A fresh 0700 directory under $TMPDIR for one test, removed with everything in it on deinit.
package final class TestDirectory {
  package let path: String

  package init(_ name: String = #function) {
    let base = ProcessInfoLite.environment("TMPDIR") ?? "/tmp"
    var template = Array("\(base)/crumbs-test-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(made != nil, "mkdtemp failed")
    path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  package func file(_ name: String) -> String { path + "/" + name }

  deinit {
    _ = system("rm -rf '\(path)'")
  }
}

/// The permission bits of `path` itself (a symbolic link is not followed).
package func fileMode(of path: String) -> mode_t {
  var info = stat()
  _ = lstat(path, &info)
  return info.st_mode & 0o777
}

package enum ProcessInfoLite {
  package static func environment(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
  }
}

/// Tests that install process-wide state (the installed ring, the crash handler, signal
/// handlers, a CrumbsClient) take this lock for their whole body: Swift Testing runs suites in
/// parallel, and two such tests at once would write into each other's rings.
package enum ProcessWideState {
  private static let lock = NSLock()

  package static func exclusive<Result>(_ body: () throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body()
  }
}
