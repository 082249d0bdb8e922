// ThreadDumpAsker.swift — how `crumbs threads PID` asks a running process for a dump of its
// threads and gets the answer, without new privileges and without polling on a timer.
//
// Entry points, in call order:
//   ThreadDumpAsker.findRing(pid:)   a pidfd on the process first, then /proc/PID opened and
//                                    checked to be that process's (the pidfd still names a live
//                                    process after the open), and every /proc read through that
//                                    descriptor; the process's ring: a mapped file
//                                    `…/rings/<session>.ring` in its maps, reached beneath the
//                                    process's own root (/proc/PID/root) one component at a time
//                                    without following links, a regular file of the process's
//                                    user whose header names that process and is running; its
//                                    `thread_dump_signal` (0: no client answers dumps there)
//   ask(timeout:)                    inotify on the ring's folder (the open descriptor) first,
//                                    then pidfd_send_signal(signal, cookie) through the pidfd: a
//                                    process that ended in the meantime fails with ESRCH, and the
//                                    signal (whose default action ends a process) never reaches
//                                    a later process given the same pid; the answer is
//                                    `<session>.threads-<cookie>.json`, noticed when it is renamed
//                                    into place; the process ending first, or the time running
//                                    out, is an error in words
//   openOperations(now:)             the ring's in-flight ledger, reopened beneath the folder's
//                                    descriptor as findRing opened it, read twice as untrusted
//                                    bytes (RingReader.readLedger)
//   readAnswer(cookie:)              the answer opened beneath the folder's descriptor: looked at
//                                    before it is opened (a link, FIFO or device is refused, never
//                                    opened), a regular file of the process's user, read within a
//                                    bound, then unlinked there; the caller decodes it as
//                                    untrusted bytes (ThreadDumpAnswer)
//
// Why so careful: the CLI often runs as root, and the process asked may be anyone's. It knows
// the cookie, so it can put a link, a FIFO or a device at the answer's name; its folder path can
// hold links (and behind /proc/PID/root an absolute link would resolve in our root, not its
// own). Nothing the process controls is followed, and nothing but a regular file of its user is
// read.
//
// Who may ask: the kernel's kill rule (EPERM otherwise), and reading the answer needs the ring's
// folder (0700) and file (0600): the same user, or root. Not signal-safe.

import Crumbs
import CrumbsPlatform
import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// Why a dump could not be had, in words for the command line.
struct ThreadDumpFailure: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

final class ThreadDumpAsker {
  /// The process asked.
  let pid: Int32
  /// Its ring file as the process maps it (for messages and the answer's name).
  let ringPath: String
  /// What the ring's header says.
  let header: RingHeaderInfo
  /// The pidfd, opened before anything was read about the process.
  private let process: Int32
  /// The ring's folder, opened beneath the process's root without following links.
  private let folder: Int32
  /// The process's uids (real, effective, saved, file system): the ring and the answer must be
  /// files of one of them.
  private let users: Set<UInt32>

  private init(
    pid: Int32, ringPath: String, header: RingHeaderInfo, process: Int32, folder: Int32, users: Set<UInt32>
  ) {
    self.pid = pid
    self.ringPath = ringPath
    self.header = header
    self.process = process
    self.folder = folder
    self.users = users
  }

  deinit {
    Syscall.close(folder)
    Syscall.close(process)
  }

  /// The largest answer read (a dump of 4096 threads of 128 frames, with modules, is far less).
  static let answerLimit = 64 << 20

  /// Finds the ring of process `pid`, or says why there is none to ask.
  static func findRing(pid: Int32) throws(ThreadDumpFailure) -> ThreadDumpAsker {
    let process: Int32
    do {
      process = try Syscall.openProcessDescriptor(pid)
    } catch {
      switch error.errno {
      case .noSuchProcess?: throw ThreadDumpFailure("no process \(pid)")
      case .noFunction?:
        throw ThreadDumpFailure("this kernel has no pidfd_open (Linux 5.3): cannot ask a process safely")
      default: throw ThreadDumpFailure("cannot open process \(pid): \(error)")
      }
    }
    var handedOver = false
    defer { if !handedOver { Syscall.close(process) } }
    let proc: Int32
    do {
      proc = try Syscall.open("/proc/\(pid)", O_RDONLY | O_DIRECTORY)
    } catch {
      throw ThreadDumpFailure("no process \(pid) in /proc: \(error)")
    }
    defer { Syscall.close(proc) }
    // The pidfd was opened first: if its process still lives now, /proc/PID was opened on that
    // same process (a pid is not given again while its process lives), and reads through `proc`
    // never reach another one.
    do {
      try Syscall.signalProcess(process, 0)
    } catch {
      switch error.errno {
      case .noSuchProcess?: throw ThreadDumpFailure("process \(pid) ended before it was asked")
      case .notPermitted?:
        throw ThreadDumpFailure(
          "not permitted to signal process \(pid): only a user who may signal it (its own user, or root) can dump it"
        )
      default: throw ThreadDumpFailure("cannot signal process \(pid): \(error)")
      }
    }
    let maps: [UInt8]
    let status: [UInt8]
    do {
      maps = try Syscall.readFile(named: "maps", in: proc, limit: 64 << 20, path: "/proc/\(pid)/maps")
      status = try Syscall.readFile(named: "status", in: proc, limit: 1 << 20, path: "/proc/\(pid)/status")
    } catch {
      switch error.errno {
      case .noSuchProcess?: throw ThreadDumpFailure("process \(pid) ended before it was asked")
      case .permissionDenied?, .notPermitted?:
        throw ThreadDumpFailure(
          "cannot read /proc/\(pid)/maps: only a user who may signal the process (its own user, or root) can dump it"
        )
      default: throw ThreadDumpFailure("cannot read /proc/\(pid): \(error)")
      }
    }
    let users = Self.userIDs(inStatus: status)
    let candidates = ringPaths(inMaps: maps)
    guard !candidates.isEmpty else {
      throw ThreadDumpFailure("process \(pid) maps no Crumbs ring: no Crumbs client running?")
    }
    // The process's root as it sees it (a container's, or ours): mapped paths are resolved there.
    let root: Int32
    do {
      root = try Syscall.open("/proc/self/fd/\(proc)/root", Syscall.openPathOnly | O_DIRECTORY)
    } catch {
      throw ThreadDumpFailure("cannot open the root of process \(pid): \(error)")
    }
    defer { Syscall.close(root) }
    let namespace = Syscall.followedStatus(ofPath: "/proc/self/fd/\(proc)/ns/pid")
    var reasons: [String] = []
    var withoutDumps = false
    for mapped in candidates {
      let folder: Int32
      do {
        folder = try openFolder(of: mapped, beneath: root)
      } catch {
        reasons.append("\(mapped): \(error)")
        continue
      }
      var keep = false
      defer { if !keep { Syscall.close(folder) } }
      let ring: Syscall.OpenedFile
      do {
        ring = try Syscall.openRegularFile(named: Syscall.baseName(of: mapped), in: folder, path: mapped)
      } catch {
        reasons.append("\(mapped): \(error)")
        continue
      }
      defer { Syscall.close(ring.fd) }
      guard users.contains(ring.owner) else {
        reasons.append("\(mapped): owned by uid \(ring.owner), not by the process's user")
        continue
      }
      let header: RingHeaderInfo
      do {
        header = try RingReader.readHeader(descriptor: ring.fd, size: ring.size, path: mapped)
      } catch {
        reasons.append("\(mapped): \(error)")
        continue
      }
      let pidNamespace = (try? namespace.get())?.fileID.inode ?? 0
      guard header.state == .running, names(header, pid: pid, namespace: pidNamespace) else {
        reasons.append("\(mapped): its header names pid \(header.pid), state \(header.state.rawValue)")
        continue
      }
      guard header.threadDumpSignal != 0 else {
        withoutDumps = true
        continue
      }
      keep = true
      handedOver = true
      return ThreadDumpAsker(
        pid: pid, ringPath: mapped, header: header, process: process, folder: folder, users: users)
    }
    if withoutDumps {
      throw ThreadDumpFailure("process \(pid) did not enable thread dumps (no Crumbs client running?)")
    }
    throw ThreadDumpFailure(
      "process \(pid) has no readable Crumbs ring of its own:\n  " + reasons.joined(separator: "\n  "))
  }

  /// Opens the folder of `mapped` (an absolute path as the process sees it) beneath its `root`,
  /// one component at a time, refusing any symbolic link and any `.` or `..`: the path in maps
  /// is the kernel's own, with no link in it, so a link there now was put there since.
  static func openFolder(of mapped: String, beneath root: Int32) throws(SystemCallError) -> Int32 {
    let components = Syscall.directoryName(of: mapped).split(separator: "/").map(String.init)
    var fd = try Syscall.open("/proc/self/fd/\(root)", O_RDONLY | O_DIRECTORY)
    var walked = ""
    for component in components {
      walked += "/" + component
      guard component != ".", component != ".." else {
        Syscall.close(fd)
        throw SystemCallError(call: "open", path: walked, refusal: .other("not a plain folder name"))
      }
      do {
        let next = try Syscall.openDirectory(named: component, in: fd, path: walked)
        Syscall.close(fd)
        fd = next
      } catch {
        Syscall.close(fd)
        throw error
      }
    }
    return fd
  }

  /// The real, effective, saved and file-system uids of a /proc/PID/status text.
  static func userIDs(inStatus status: [UInt8]) -> Set<UInt32> {
    for line in status.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("Uid:".utf8)) {
      let fields = line.dropFirst(4).split { $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: " ") }
      return Set(fields.compactMap { UInt32(String(decoding: $0, as: UTF8.self)) })
    }
    return []
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
      guard path.hasSuffix(".ring"),
        Syscall.directoryName(of: path).hasSuffix("/" + CrumbsDirectory.ringsFolderName),
        !paths.contains(path)
      else { continue }
      paths.append(path)
    }
    return paths
  }

  /// Whether the header names process `pid`: its pid, or — when the writer runs in another pid
  /// namespace (a container), where its pid is another number — that namespace (`namespace`, the
  /// inode of the process's ns/pid) is `pid`'s.
  static func names(_ header: RingHeaderInfo, pid: Int32, namespace: UInt64) -> Bool {
    if header.pid == pid { return true }
    return header.writerPIDNamespace != 0 && namespace == header.writerPIDNamespace
      && namespace != SystemFacts.pidNamespace(of: "self")
  }

  /// The answer's name for `cookie`, in the ring's folder.
  func answerName(cookie: UInt32) -> String {
    Syscall.baseName(of: RingDirectory.threadDumpPath(forRing: ringPath, cookie: cookie))
  }

  /// Asks for a dump and waits at most `timeout` seconds for the answer to appear.
  func ask(cookie: UInt32, timeout: Double) throws(ThreadDumpFailure) {
    let name = answerName(cookie: cookie)
    // Both watches before the request: an answer or a death after it cannot be missed.
    let watch: Int32
    do {
      watch = try Syscall.watchDirectory(descriptor: folder)
    } catch {
      throw ThreadDumpFailure("cannot watch \(Syscall.directoryName(of: ringPath)) for the answer: \(error)")
    }
    defer { Syscall.close(watch) }
    do {
      try Syscall.signalProcess(process, header.threadDumpSignal, value: Int32(bitPattern: cookie))
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
      if Syscall.status(of: name, in: folder) != nil { return }
      let remaining = deadline - SystemClock.monotonicSeconds()
      guard remaining > 0 else {
        throw ThreadDumpFailure(
          "process \(pid) did not answer within \(Self.seconds(timeout)) (busy, stopped, or its thread-dump signal blocked?)"
        )
      }
      var descriptors = [
        pollfd(fd: watch, events: Int16(POLLIN), revents: 0),
        pollfd(fd: process, events: Int16(POLLIN), revents: 0),
      ]
      do {
        try Syscall.poll(&descriptors, timeoutMilliseconds: Int32((remaining * 1000).rounded(.up)))
      } catch {
        throw ThreadDumpFailure("cannot wait for the answer: \(error)")
      }
      let names = Syscall.watchedNames(watch)
      if names.contains(name) || Syscall.status(of: name, in: folder) != nil { return }
      if descriptors[1].revents != 0 { throw ThreadDumpFailure("process \(pid) ended before it answered") }
    }
  }

  /// Reads the answer to `cookie` and removes it (it is ours: no one else asked with its
  /// cookie). Only a regular file of the process's user is opened (a link, FIFO or device at its
  /// name is refused without being opened), and at most `answerLimit` bytes of it are read.
  func readAnswer(cookie: UInt32) throws(ThreadDumpFailure) -> [UInt8] {
    let name = answerName(cookie: cookie)
    let path = Syscall.directoryName(of: ringPath) + "/" + name
    defer { _ = try? Syscall.unlink(named: name, in: folder, path: path) }
    let file: Syscall.OpenedFile
    do {
      file = try Syscall.openRegularFile(named: name, in: folder, path: path)
    } catch {
      throw ThreadDumpFailure("refused the answer \(path): \(error)")
    }
    defer { Syscall.close(file.fd) }
    guard users.contains(file.owner) else {
      throw ThreadDumpFailure(
        "refused the answer \(path): owned by uid \(file.owner), not by the process's user")
    }
    do {
      return try Syscall.readAll(file.fd, limit: Self.answerLimit, path: path)
    } catch {
      throw ThreadDumpFailure("cannot read the answer \(path): \(error)")
    }
  }

  /// The operations open in the process's in-flight ledger now, read from its ring file (the
  /// process's bytes: untrusted, RingReader.readLedger), reopened beneath the folder's
  /// descriptor as `findRing` opened it; nil when its ring has no ledger. Aged at `now` (wall ns).
  func openOperations(now: UInt64) throws(ThreadDumpFailure) -> CrashReport.OpenOperations? {
    let ring: Syscall.OpenedFile
    do {
      ring = try Syscall.openRegularFile(named: Syscall.baseName(of: ringPath), in: folder, path: ringPath)
    } catch {
      throw ThreadDumpFailure("cannot open the ring \(ringPath) for its open operations: \(error)")
    }
    defer { Syscall.close(ring.fd) }
    guard users.contains(ring.owner) else {
      throw ThreadDumpFailure(
        "refused the ring \(ringPath): owned by uid \(ring.owner), not by the process's user")
    }
    do {
      return try RingReader.readLedger(descriptor: ring.fd, size: ring.size, path: ringPath).map {
        CrashReport.OpenOperations($0, death: now)
      }
    } catch {
      throw ThreadDumpFailure("cannot read the open operations of \(ringPath): \(error)")
    }
  }

  static func seconds(_ value: Double) -> String {
    value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
  }
}
