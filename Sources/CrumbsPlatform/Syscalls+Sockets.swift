// Syscalls+Sockets.swift — the calls of a TCP client that must never block past its deadline:
// name resolution, a non-blocking connect, sends that never raise SIGPIPE, and receives. See
// Syscalls+Linux.swift. Not signal-safe.

import Synchronization
import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

extension Syscall {
  /// One address a name resolved to, ready for `connect`.
  package struct SocketAddress: Sendable {
    package var family: Int32
    package var bytes: [UInt8]
  }

  /// The addresses `host` and `port` resolve to (TCP), in getaddrinfo's order. A numeric
  /// address is answered at once; a name is looked up on a thread of its own, and when it takes
  /// longer than `timeoutMilliseconds` this returns `nil` (the lookup ends on its own later, its
  /// result dropped): glibc's resolver has no deadline of its own finer than resolv.conf's.
  /// Throws when the name does not resolve (`call` "getaddrinfo", errno EHOSTUNREACH).
  package static func resolve(host: String, port: Int, timeoutMilliseconds: Int) throws(SystemCallError)
    -> [SocketAddress]?
  {
    if let numeric = lookUp(host: host, port: port, numericOnly: true) { return numeric }
    // The lookup thread hands its answer over under the Mutex and wakes the caller through a
    // pipe, unless the caller gave up (then it closed the read end: no write, no SIGPIPE).
    struct Handover {
      var answered = false
      var abandoned = false
      var result: [SocketAddress]?
    }
    let wake = try wakePipe()
    let handover = Mutex(Handover())
    let work: @Sendable () -> Void = {
      let result = lookUp(host: host, port: port, numericOnly: false)
      handover.withLock { state in
        state.answered = true
        state.result = result
        if !state.abandoned { signalWakePipe(wake.write) }
      }
      close(wake.write)
    }
    do { try BackgroundThread.start(name: "crumbs.resolve", work) } catch { work() }
    var descriptors = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
    let deadline = SystemClock.monotonicNanoseconds() &+ UInt64(max(0, timeoutMilliseconds)) &* 1_000_000
    var answer: (answered: Bool, result: [SocketAddress]?) = (false, nil)
    while true {
      answer = handover.withLock { ($0.answered, $0.result) }
      let now = SystemClock.monotonicNanoseconds()
      if answer.answered || now >= deadline { break }
      try? poll(&descriptors, timeoutMilliseconds: Int32(min(1000, (deadline - now) / 1_000_000 + 1)))
    }
    handover.withLock { state in
      state.abandoned = true
      answer = (state.answered, state.result)
    }
    close(wake.read)
    guard answer.answered else { return nil }
    guard let addresses = answer.result, !addresses.isEmpty else {
      throw SystemCallError(call: "getaddrinfo", path: host, errno: .noRouteToHost)
    }
    return addresses
  }

  private static func lookUp(host: String, port: Int, numericOnly: Bool) -> [SocketAddress]? {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_family = AF_UNSPEC
    // No AI_ADDRCONFIG: in a container with only a loopback interface it drops the loopback
    // addresses of "localhost" too.
    hints.ai_flags = numericOnly ? AI_NUMERICHOST | AI_NUMERICSERV : AI_NUMERICSERV
    var list: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return nil }
    defer { freeaddrinfo(first) }
    var addresses: [SocketAddress] = []
    var next: UnsafeMutablePointer<addrinfo>? = first
    while let entry = next, addresses.count < 16 {
      if let address = entry.pointee.ai_addr, entry.pointee.ai_addrlen > 0 {
        let bytes = UnsafeRawBufferPointer(start: address, count: Int(entry.pointee.ai_addrlen))
        addresses.append(SocketAddress(family: entry.pointee.ai_family, bytes: Array(bytes)))
      }
      next = entry.pointee.ai_next
    }
    return addresses.isEmpty ? nil : addresses
  }

  /// A non-blocking, close-on-exec TCP socket for `address`, its connect started: the caller
  /// waits for POLLOUT, then asks `socketError`.
  package static func startConnect(_ address: SocketAddress) throws(SystemCallError) -> Int32 {
    let fd = try retrying("socket") {
      socket(
        address.family,
        Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
          | Int32(SOCK_CLOEXEC.rawValue), 0)
    }
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    let result = address.bytes.withUnsafeBytes {
      connect(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count))
    }
    if result == 0 { return fd }
    let error = Errno(rawValue: Glibc.errno)
    // EINTR: the connect goes on in the background, as EINPROGRESS.
    if error == .nowInProgress || error == .interrupted { return fd }
    close(fd)
    throw SystemCallError(call: "connect", errno: error)
  }

  /// The pending error of a socket (SO_ERROR): nil once a connect succeeded.
  package static func socketError(_ fd: Int32) -> Errno? {
    var value: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 else {
      return Errno(rawValue: Glibc.errno)
    }
    return value == 0 ? nil : Errno(rawValue: value)
  }

  /// Sends what the socket takes now of `bytes` (MSG_NOSIGNAL: a closed peer is an error, never
  /// SIGPIPE); 0 when it takes nothing now (EAGAIN).
  package static func sendSome(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
    while true {
      let sent = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
      if sent >= 0 { return sent }
      let error = Errno(rawValue: Glibc.errno)
      if error == .interrupted { continue }
      if error == .wouldBlock || error == .resourceTemporarilyUnavailable { return 0 }
      throw SystemCallError(call: "send", errno: error)
    }
  }

  /// Receives what the socket holds now into `buffer`: the count, 0 at the end of the stream,
  /// nil when nothing is there yet (EAGAIN).
  package static func receiveSome(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer)
    throws(SystemCallError)
    -> Int?
  {
    while true {
      let count = recv(fd, buffer.baseAddress, buffer.count, 0)
      if count >= 0 { return count }
      let error = Errno(rawValue: Glibc.errno)
      if error == .interrupted { continue }
      if error == .wouldBlock || error == .resourceTemporarilyUnavailable { return nil }
      throw SystemCallError(call: "recv", errno: error)
    }
  }
}
