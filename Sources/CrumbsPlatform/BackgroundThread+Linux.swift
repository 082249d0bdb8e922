// BackgroundThread+Linux.swift — the one way Crumbs starts a thread of its own: the client's
// start-up work, the uploader, the memory-pressure monitor, the CLI demo's workers.
//
// A plain pthread (no Foundation `Thread`, no Dispatch), named so it shows in `top -H`, gdb and
// crash reports. `start` detaches it; `startJoinable` returns a handle to `join`.
// Not signal-safe.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

package struct BackgroundThread: @unchecked Sendable {
  private let thread: pthread_t

  /// Starts `body` on a new detached thread named `name` (Linux keeps the first 15 bytes).
  package static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(SystemCallError) {
    let thread = try create(name: name, body)
    pthread_detach(thread.thread)
  }

  /// Starts `body` on a new thread named `name`; the caller must `join` it.
  package static func startJoinable(name: String, _ body: @escaping @Sendable () -> Void)
    throws(SystemCallError)
    -> BackgroundThread
  {
    try create(name: name, body)
  }

  /// Waits for the thread to return.
  package func join() { pthread_join(thread, nil) }

  private final class Start {
    let name: String
    let body: @Sendable () -> Void
    init(name: String, body: @escaping @Sendable () -> Void) {
      self.name = name
      self.body = body
    }
  }

  private static func create(name: String, _ body: @escaping @Sendable () -> Void) throws(SystemCallError)
    -> BackgroundThread
  {
    let context = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
    var created = pthread_t()
    let result = pthread_create(
      &created, nil,
      { raw in
        let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
        Syscall.setCurrentThreadName(start.name)
        start.body()
        return nil
      }, context)
    guard result == 0 else {
      Unmanaged<Start>.fromOpaque(context).release()
      throw SystemCallError(call: "pthread_create", errno: Errno(rawValue: result))
    }
    return BackgroundThread(thread: created)
  }
}
