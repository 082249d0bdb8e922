// ThreadDumpRequests.swift — the Swift face of crumbs_thread_dump.c: the real-time signal by
// which `crumbs threads PID` asks this process for a dump of its threads, and the pipe its
// handler wakes.
//
// Entry points, in call order:
//   ThreadDumpRequests.install(ring:)   a wake pipe, the request signal taken, the ring's header
//                                       naming it (`thread_dump_signal`)
//   [signal] the C handler              writes the request's cookie to the pipe
//   requests.descriptor / take()        the responder polls the descriptor, then takes the
//                                       cookies waiting (each request once)
//   requests.uninstall()                the header back to 0, the handler inert, the pipe closed
//
// The answering (the capture, the file next to the ring) is the client's (Crumbs'
// ThreadDumpResponder): the recorder only carries the request. Who may ask is whoever may signal
// the process (the kernel's kill rule); see crumbs_thread_dump.h. One installed at a time per
// process. Not signal-safe (set-up and an ordinary thread's reads).

import CrumbsPlatform
import CrumbsSignalPath
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Why the request signal could not be installed.
package enum ThreadDumpRequestError: Error, Equatable, CustomStringConvertible {
  /// Another `ThreadDumpRequests` is installed in this process.
  case alreadyInstalled
  /// Every real-time signal below the crash handler's is handled by someone else.
  case noFreeSignal
  /// The ring is closed.
  case ringClosed
  case system(SystemCallError)

  package var description: String {
    switch self {
    case .alreadyInstalled: "thread dumps: a request signal is installed already"
    case .noFreeSignal:
      "thread dumps: every real-time signal is taken; `crumbs threads` cannot ask this process"
    case .ringClosed: "thread dumps: the ring is closed"
    case .system(let error): "thread dumps: \(error)"
    }
  }
}

/// The request signal of `crumbs threads`, installed, and the pipe it wakes.
package final class ThreadDumpRequests: Sendable {
  /// The real-time signal that asks (also in the ring header's `thread_dump_signal`).
  package let signal: Int32
  /// Readable when requests wait: poll it for `POLLIN`, then `take()`. Valid until `uninstall`.
  package let descriptor: Int32
  private let writeEnd: Int32
  private let installed = Atomic<Bool>(true)

  /// Serializes install and uninstall (the C side keeps one process-wide state).
  private static let lock = Mutex(())

  /// How many bytes one request writes: its cookie, a little-endian `UInt32`.
  static let requestSize = 4

  private init(signal: Int32, descriptor: Int32, writeEnd: Int32) {
    self.signal = signal
    self.descriptor = descriptor
    self.writeEnd = writeEnd
  }

  /// Takes a real-time signal nobody handles, below the crash handler's capture signal, and names
  /// it in `ring`'s header. Requests queue in a pipe (a flood beyond its 64 KiB is dropped).
  package static func install(ring: BreadcrumbRing) throws(ThreadDumpRequestError) -> ThreadDumpRequests {
    try lock.withLock { _ throws(ThreadDumpRequestError) -> ThreadDumpRequests in
      // Published: the C side keeps the header pointer until uninstall, so the ring's handle and
      // range must live as long as the process (as for the crash handler).
      guard let handle = ring.publish() else { throw .ringClosed }
      let pipe: (read: Int32, write: Int32)
      do throws(SystemCallError) {
        pipe = try Syscall.wakePipe()
      } catch {
        throw .system(error)
      }
      let signal = crumbs_thread_dump_install(handle, pipe.write)
      guard signal > 0 else {
        Syscall.close(pipe.read)
        Syscall.close(pipe.write)
        throw signal == 0 ? .noFreeSignal : .alreadyInstalled
      }
      return ThreadDumpRequests(signal: signal, descriptor: pipe.read, writeEnd: pipe.write)
    }
  }

  /// The cookies of the requests waiting now (each request once; a plain `kill` asks with 0), at
  /// most `limit` distinct ones, in arrival order; the rest are read and dropped, so a flood
  /// costs one read per 4 KiB. Never blocks. Empty once uninstalled.
  package func take(limit: Int = 16) -> [UInt32] {
    guard installed.load(ordering: .acquiring) else { return [] }
    var cookies: [UInt32] = []
    while true {
      let bytes = Syscall.readAvailable(descriptor, limit: 4096)
      if bytes.isEmpty { return cookies }
      var index = 0
      while index + Self.requestSize <= bytes.count {
        let cookie =
          UInt32(bytes[index]) | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2]) << 16
          | UInt32(bytes[index + 3]) << 24
        if cookies.count < limit, !cookies.contains(cookie) { cookies.append(cookie) }
        index += Self.requestSize
      }
    }
  }

  /// The installed request signal (0: none), as the C side says.
  package static var installedSignal: Int32 { crumbs_thread_dump_signal() }

  /// Sets the header's `thread_dump_signal` back to 0, makes the handler drop requests, and
  /// closes the pipe. The first call does it; later ones do nothing.
  package func uninstall() {
    Self.lock.withLock { _ in
      guard installed.exchange(false, ordering: .acquiringAndReleasing) else { return }
      // Returns once no handler writes to the pipe any more: closing it is safe after.
      crumbs_thread_dump_uninstall()
      Syscall.close(writeEnd)
      Syscall.close(descriptor)
    }
  }
}
