// PersistedFile.swift — opening a file another process (or an older Crumbs, or nobody we know)
// left behind, handing it to a parser, and saying in one line why it could not be read.
//
// Entry points, in call order:
//   PersistedFile.read(path, as:limit:image:)   the whole file into memory, then the parser
//                                               (crash records); 128 KiB or more in a
//                                               PageBuffer, which leaves malloc's thresholds alone
//   PersistedFile.read(path, as:) { file in … } the open file, for parsers that read only parts
//                                               of it with `file.bytes(at:count:)` (ELF modules)
//                                               or `file.read(at:into:)` (rings, a chunk of
//                                               slots at a time)
//
// Every reader of persisted bytes throws the one `PersistedFileError`: which file, what kind of
// file, what kind of problem, and the errno when a system call failed. Parsers throw it without a
// path (they see bytes); `read` adds the path on the way out, so the message names the file.
// FIFOs and devices are refused without blocking. Not signal-safe.

import CrumbsPlatform
import SystemPackage

#if canImport(Glibc)
  import Glibc
#endif

/// A kind of file Crumbs reads back: `.ring`, `.crashRecord` (here), `.elf` (CrumbsReports).
public struct PersistedFormat: Hashable, Sendable, CustomStringConvertible {
  /// What a person calls it ("breadcrumb ring").
  public var name: String

  public init(_ name: String) { self.name = name }

  public var description: String { name }

  /// A breadcrumb ring file (`rings/<session>.ring`).
  public static let ring = PersistedFormat("breadcrumb ring")
  /// A crash record file (`rings/<session>.crash`).
  public static let crashRecord = PersistedFormat("crash record")
}

/// Why a file (or bytes in memory) could not be read as what it should be. The description is
/// one line, for people: `path: reason`.
public struct PersistedFileError: Error, CustomStringConvertible, Equatable, Sendable {
  public enum Kind: String, Sendable, Equatable {
    /// Not this kind of file at all (wrong magic, too short to tell).
    case unrecognized
    /// This kind of file, in a version or variant this reader does not handle (written by a
    /// newer Crumbs; a 32-bit or big-endian ELF file).
    case unsupported
    /// The header or a table it needs is inconsistent, or lies outside the file.
    case corrupt
    /// Shorter than its header says.
    case truncated
    /// Could not be opened or read (missing, permissions, not a regular file, I/O); `errno`
    /// says why when a system call failed.
    case unreadable
  }

  public var kind: Kind
  /// What is wrong, one line, without the path.
  public var reason: String
  /// What the file should have been.
  public var format: PersistedFormat
  /// The file, when the bytes came from one.
  public var path: String?
  /// What the failed system call left in errno (with `.unreadable`).
  public var errno: Errno?

  public init(
    _ kind: Kind, _ reason: String, format: PersistedFormat, path: String? = nil, errno: Errno? = nil
  ) {
    self.kind = kind
    self.reason = reason
    self.format = format
    self.path = path
    self.errno = errno
  }

  public var description: String { path.map { "\($0): \(reason)" } ?? reason }
}

/// A regular file open for reading, handed to a parser by `PersistedFile.read`; valid only
/// inside that call (the descriptor is closed when it returns).
package struct PersistedFile {
  package let path: String
  package let format: PersistedFormat
  /// Its size when it was opened.
  package let size: UInt64
  private let descriptor: Int32

  /// Opens `path`, hands it to `parse` and closes it. Errors name the path, the parser's too.
  package static func read<T>(
    _ path: String, as format: PersistedFormat, _ parse: (PersistedFile) throws(PersistedFileError) -> T
  ) throws(PersistedFileError) -> T {
    let opened: (fd: Int32, size: UInt64)
    do {
      opened = try Syscall.openRegularFileForReading(path)
    } catch {
      throw PersistedFileError(
        .unreadable, "cannot \(error.call == "open" ? "open" : "read"): \(error.cause)", format: format,
        path: path, errno: error.errno)
    }
    defer { Syscall.close(opened.fd) }
    let file = PersistedFile(path: path, format: format, size: opened.size, descriptor: opened.fd)
    do {
      return try parse(file)
    } catch {
      var named = error
      named.path = named.path ?? path
      throw named
    }
  }

  /// Reads the whole file (more than `limit` bytes is an error) and parses it in memory.
  package static func read<T>(
    _ path: String, as format: PersistedFormat, limit: Int,
    image parse: (UnsafeRawBufferPointer) throws(PersistedFileError) -> T
  ) throws(PersistedFileError) -> T {
    try read(path, as: format) { file throws(PersistedFileError) in
      guard file.size <= UInt64(limit) else {
        throw PersistedFileError(
          .unreadable, "cannot read: \(file.size) bytes, more than \(limit)", format: format)
      }
      let count = Int(file.size)
      guard PageBuffer.isWorthIt(byteCount: count) else {
        let bytes = try file.bytes(at: 0, count: count)
        return try bytes.withUnsafeBytes { image in
          Result { () throws(PersistedFileError) in try parse(image) }
        }.get()
      }
      // A ring (1 MiB by default) or a crash record: pages of its own, not malloc's (PageBuffer).
      // Read, not mapped: a mapped file that shrinks under the reader (another process, a
      // hostile one) or whose disk fails a read faults with SIGBUS where a read returns an
      // error, and a ring that cannot be read must be quarantined, not end the process at
      // every start (mapping it was a third cheaper: not worth a SIGBUS).
      let buffer = try file.pages(at: 0, count: count)
      return try withExtendedLifetime(buffer) { () throws(PersistedFileError) in
        try parse(UnsafeRawBufferPointer(buffer.bytes))
      }
    }
  }

  /// Up to `count` bytes at `offset` in a PageBuffer of their own (its `bytes` are as many as
  /// were read: fewer only where the file ends).
  package func pages(at offset: UInt64, count: Int) throws(PersistedFileError) -> PageBuffer {
    do throws(SystemCallError) {
      // Populated at once: the read fills every page, so faulting them in one by one only adds
      // a fault per page.
      let buffer = try PageBuffer(byteCount: count, populated: true)
      let read = try Syscall.read(descriptor, at: offset, into: buffer.bytes, path: path)
      buffer.shrink(to: read)
      return buffer
    } catch {
      throw PersistedFileError(
        .unreadable, "cannot read: \(error.cause)", format: format, path: path, errno: error.errno)
    }
  }

  /// Fills `buffer` from `offset` and says how many bytes it read: fewer only where the file
  /// ends (RingReader.read(file:) reads its slots a chunk at a time with it).
  package func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(PersistedFileError)
    -> Int
  {
    do {
      return try Syscall.read(descriptor, at: offset, into: buffer, path: path)
    } catch {
      throw PersistedFileError(
        .unreadable, "cannot read: \(error.cause)", format: format, path: path, errno: error.errno)
    }
  }

  /// Up to `count` bytes at `offset`: fewer only where the file ends.
  package func bytes(at offset: UInt64, count: Int) throws(PersistedFileError) -> [UInt8] {
    do {
      return try Syscall.read(descriptor, at: offset, count: count, path: path)
    } catch {
      throw PersistedFileError(
        .unreadable, "cannot read: \(error.cause)", format: format, path: path, errno: error.errno)
    }
  }
}
