// ThreadDumpAsker.swift — how `crumbs threads PID` asks a running process for a dump of its
// threads and gets the answer, without new privileges and without polling on a timer.
//
// Entry points, in call order:
//   ThreadDumpAsker.findRing(pid:)   the process's ring: a mapped file `…/rings/<session>.ring`
//                                    in /proc/PID/maps whose header names that process (magic,
//                                    pid) and is running; its `thread_dump_signal` (0: no client
//                                    answers dumps there)
//   ask(timeout:)                    inotify on the ring's folder and a pidfd on the process
//                                    first, then sigqueue(signal, cookie): the answer is
//                                    `<session>.threads-<cookie>.json`, noticed when it is
//                                    renamed into place; the process ending first, or the time
//                                    running out, is an error in words
//   (then the caller reads the file as untrusted bytes and deletes it: ThreadDumpAnswer)
//
// Who may ask: the kernel's kill rule (EPERM otherwise), and reading the answer needs the ring's
// folder (0700) and file (0600): the same user, or root. Not signal-safe.

import Crumbs
import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

/// Why a dump could not be had, in words for the command line.
struct ThreadDumpFailure: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

struct ThreadDumpAsker {
  /// The process asked.
  var pid: Int32
  /// Its ring file, as this process can open it.
  var ringPath: String
  /// What the ring's header says.
  var header: RingHeaderInfo

  /// The largest answer read (a dump of 4096 threads of 128 frames, with modules, is far less).
  static let answerLimit = 64 << 20

  /// Finds the ring of process `pid`, or says why there is none to ask.
  static func findRing(pid: Int32) throws(ThreadDumpFailure) -> ThreadDumpAsker {
    let maps: [UInt8]
    do {
      maps = try Syscall.readFile("/proc/\(pid)/maps", limit: 64 << 20)
    } catch {
      switch error.errno {
      case .noSuchFileOrDirectory?, .noSuchProcess?: throw ThreadDumpFailure("no process \(pid)")
      case .permissionDenied?, .notPermitted?:
        throw ThreadDumpFailure(
          "cannot read /proc/\(pid)/maps: only a user who may signal the process (its own user, or root) can dump it"
        )
      default: throw ThreadDumpFailure("cannot read /proc/\(pid)/maps: \(error)")
      }
    }
    let candidates = ringPaths(inMaps: maps)
    guard !candidates.isEmpty else {
      throw ThreadDumpFailure("process \(pid) maps no Crumbs ring: no Crumbs client running?")
    }
    var reasons: [String] = []
    var found: ThreadDumpAsker?
    for mapped in candidates {
      // The path as the process sees it, else through its root (a process in another mount
      // namespace, a container).
      for path in [mapped, "/proc/\(pid)/root" + mapped] {
        let header: RingHeaderInfo
        do {
          header = try RingReader.readHeader(file: path).header
        } catch {
          reasons.append("\(path): \(error)")
          continue
        }
        guard header.state == .running, names(header, pid: pid) else {
          reasons.append("\(path): its header names pid \(header.pid), state \(header.state.rawValue)")
          break
        }
        let asker = ThreadDumpAsker(pid: pid, ringPath: path, header: header)
        if header.threadDumpSignal != 0 { return asker }
        found = found ?? asker
        break
      }
    }
    if found != nil {
      throw ThreadDumpFailure("process \(pid) did not enable thread dumps (no Crumbs client running?)")
    }
    throw ThreadDumpFailure(
      "process \(pid) has no readable Crumbs ring of its own:\n  " + reasons.joined(separator: "\n  "))
  }

  /// The mapped files of a /proc/PID/maps text that are rings in a Crumbs `rings/` folder, each
  /// once, in the order mapped. A deleted file (`(deleted)`) is no longer a ring to ask.
  static func ringPaths(inMaps maps: [UInt8]) -> [String] {
    var paths: [String] = []
    for line in maps.split(separator: UInt8(ascii: "\n")) {
      // start-end perms offset dev inode path: the path starts at the first "/" after the inode.
      var fields = 0
      var index = line.startIndex
      while index < line.endIndex, fields < 5 {
        while index < line.endIndex, line[index] != UInt8(ascii: " ") { index += 1 }
        while index < line.endIndex, line[index] == UInt8(ascii: " ") { index += 1 }
        fields += 1
      }
      guard index < line.endIndex, line[index] == UInt8(ascii: "/") else { continue }
      let path = String(decoding: line[index...], as: UTF8.self)
      guard path.hasSuffix(".ring"), Syscall.directoryName(of: path).hasSuffix("/rings"),
        !paths.contains(path)
      else { continue }
      paths.append(path)
    }
    return paths
  }

  /// Whether the header names process `pid`: its pid, or — when the writer runs in another pid
  /// namespace (a container), where its pid is another number — that namespace is `pid`'s.
  static func names(_ header: RingHeaderInfo, pid: Int32) -> Bool {
    if header.pid == pid { return true }
    let namespace = SystemFacts.pidNamespace(of: "\(pid)")
    return header.writerPIDNamespace != 0 && namespace == header.writerPIDNamespace
      && namespace != SystemFacts.pidNamespace(of: "self")
  }

  /// Asks for a dump and waits at most `timeout` seconds for the answer; returns its path.
  func ask(cookie: UInt32, timeout: Double) throws(ThreadDumpFailure) -> String {
    let folder = Syscall.directoryName(of: ringPath)
    let answer = RingDirectory.threadDumpPath(forRing: ringPath, cookie: cookie)
    let answerName = Syscall.baseName(of: answer)
    // Both watches before the request: an answer or a death after it cannot be missed.
    let watch: Int32
    do {
      watch = try Syscall.watchDirectory(folder)
    } catch {
      throw ThreadDumpFailure("cannot watch \(folder) for the answer: \(error)")
    }
    defer { Syscall.close(watch) }
    let process = Syscall.processDescriptor(pid)
    defer { if let process { Syscall.close(process) } }
    do {
      try Syscall.queueSignal(header.threadDumpSignal, value: Int32(bitPattern: cookie), to: pid)
    } catch {
      switch error.errno {
      case .notPermitted?:
        throw ThreadDumpFailure(
          "not permitted to signal process \(pid): only a user who may signal it (its own user, or root) can dump it"
        )
      case .noSuchProcess?: throw ThreadDumpFailure("process \(pid) ended before it was asked")
      case .resourceTemporarilyUnavailable?:
        throw ThreadDumpFailure("process \(pid) has too many signals queued; try again")
      default: throw ThreadDumpFailure("cannot ask process \(pid): \(error)")
      }
    }
    let deadline = SystemClock.monotonicSeconds() + timeout
    while true {
      if Syscall.fileExists(answer) { return answer }
      let remaining = deadline - SystemClock.monotonicSeconds()
      guard remaining > 0 else {
        throw ThreadDumpFailure(
          "process \(pid) did not answer within \(Self.seconds(timeout)) (busy, stopped, or its thread-dump signal blocked?)"
        )
      }
      var descriptors = [pollfd(fd: watch, events: Int16(POLLIN), revents: 0)]
      if let process { descriptors.append(pollfd(fd: process, events: Int16(POLLIN), revents: 0)) }
      // Without a pidfd (a kernel before 5.3), the process is looked at every 100 ms.
      let wait = process == nil ? min(remaining, 0.1) : remaining
      do {
        try Syscall.poll(&descriptors, timeoutMilliseconds: Int32((wait * 1000).rounded(.up)))
      } catch {
        throw ThreadDumpFailure("cannot wait for the answer: \(error)")
      }
      let names = Syscall.watchedNames(watch)
      if names.contains(answerName) || Syscall.fileExists(answer) { return answer }
      let ended =
        process.map { _ in descriptors.count > 1 && descriptors[1].revents != 0 }
        ?? !Syscall.processExists(pid)
      if ended { throw ThreadDumpFailure("process \(pid) ended before it answered") }
    }
  }

  static func seconds(_ value: Double) -> String {
    value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
  }
}
