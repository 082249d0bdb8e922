// Syscalls+Inotify.swift — inotify: one descriptor, any number of watches added and removed,
// and the events read back with the watch they belong to. A poll loop (`crumbs collect --watch`)
// watches several folders at once; Syscalls+Signals' `watchDirectory` is the one-folder case
// built on these. See Syscalls+Linux.swift for the conventions.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

extension Syscall {
  /// One inotify event: which watch, what happened (`IN_*` bits), and the name inside the watched
  /// folder (empty for an event on the folder itself).
  package struct InotifyEvent: Sendable, Equatable {
    package var watch: Int32
    package var mask: UInt32
    package var name: String

    /// The kernel dropped events (its queue was full): whatever was watched must be looked at
    /// again.
    package var overflowed: Bool { mask & UInt32(IN_Q_OVERFLOW) != 0 }
    /// The watch is gone (its folder was deleted or unmounted, or it was removed).
    package var watchRemoved: Bool { mask & UInt32(IN_IGNORED) != 0 }
  }

  /// A non-blocking, close-on-exec inotify descriptor without watches.
  package static func inotifyDescriptor() throws(SystemCallError) -> Int32 {
    try retrying("inotify_init1") { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
  }

  /// Adds (or, for a folder already watched by `fd`, replaces the mask of) a watch on `path`;
  /// returns the watch descriptor, the same one for the same folder.
  package static func addWatch(_ fd: Int32, _ path: String, mask: UInt32) throws(SystemCallError) -> Int32 {
    try retrying("inotify_add_watch", path: path) { inotify_add_watch(fd, path, mask) }
  }

  /// Removes a watch; one already gone (its folder deleted) is no error.
  package static func removeWatch(_ fd: Int32, _ watch: Int32) {
    _ = inotify_rm_watch(fd, watch)
  }

  /// The events `fd` holds now, in order (none when it has nothing to say: it is non-blocking).
  package static func inotifyEvents(_ fd: Int32) -> [InotifyEvent] {
    var events: [InotifyEvent] = []
    while true {
      let bytes = readAvailable(fd, limit: 16 * 1024)
      if bytes.isEmpty { return events }
      var offset = 0
      let headerSize = MemoryLayout<inotify_event>.size
      while offset + headerSize <= bytes.count {
        let (watch, mask, length) = bytes.withUnsafeBytes { raw in
          let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
          return (event.wd, event.mask, Int(event.len))
        }
        let nameStart = offset + headerSize
        let nameEnd = min(nameStart + length, bytes.count)
        let field = bytes[nameStart..<nameEnd]
        events.append(
          InotifyEvent(
            watch: watch, mask: mask, name: String(decoding: field.prefix { $0 != 0 }, as: UTF8.self)))
        offset = nameEnd
      }
    }
  }
}
