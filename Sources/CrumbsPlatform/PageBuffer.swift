// PageBuffer.swift — large buffers for after-the-fact work (reading a ring, a crash record, a
// module's symbol table) taken from the kernel with mmap and given back whole with munmap, never
// from malloc.
//
// Entry points, in call order:
//   PageBuffer.isWorthIt(byteCount:)   whether a buffer this large should be one (else an Array)
//   PageBuffer(byteCount:populated:)   private zeroed pages (Syscall.mapAnonymous)
//   buffer.bytes                       the memory, valid while the buffer lives
//   buffer.shrink(to:)                 fewer bytes in use (a file shorter than asked for)
//   deinit                             the pages go back to the kernel (Syscall.unmap)
//
// Why not malloc: glibc serves a block of 128 KiB or more with its own mmap, and when such a
// block is freed it raises its "mmap threshold" to the block's size (up to 32 MiB) and its trim
// threshold to twice that. After a launch freed a 1 MiB ring image, every later block under
// 1 MiB came from the reading thread's arena, and a thread's arena gives its free top back only
// past the raised trim threshold (malloc_trim trims only the main arena's top): about 2 MB
// stayed resident for the rest of the process, which the kernel then had to free at its end
// (measured in Benchmarks/README.md, "Second pass on the client's start and end"). Buffers of
// that size taken here leave malloc's thresholds where they were.
//
// Not signal-safe; not for the hot path. Not Sendable: one owner at a time.

package final class PageBuffer {
  /// glibc's default mmap threshold: below it malloc serves from its arenas and freeing moves
  /// no threshold, so an Array is as good and cheaper.
  static let smallestWorthIt = 128 << 10

  package static func isWorthIt(byteCount: Int) -> Bool { byteCount >= smallestWorthIt }

  private let base: UnsafeMutableRawPointer
  private let mappedCount: Int
  /// How many bytes of it are in use: `byteCount` at first, less after `shrink(to:)`.
  package private(set) var count: Int

  /// `populated`: every page mapped at once (MAP_POPULATE), for a buffer that is about to be
  /// filled whole (a file read into it), instead of a fault per page on first touch.
  package init(byteCount: Int, populated: Bool = false) throws(SystemCallError) {
    // mmap and munmap round the length up to whole pages themselves.
    mappedCount = max(byteCount, 1)
    base = try Syscall.mapAnonymous(size: mappedCount, populated: populated)
    count = byteCount
  }

  deinit { Syscall.unmap(base, size: mappedCount) }

  /// The bytes in use (zeroed when the buffer was made); valid while the buffer lives.
  package var bytes: UnsafeMutableRawBufferPointer {
    UnsafeMutableRawBufferPointer(start: base, count: count)
  }

  /// Keeps only the first `newCount` bytes (the pages stay mapped until the buffer goes).
  package func shrink(to newCount: Int) {
    precondition(newCount >= 0 && newCount <= count, "PageBuffer.shrink(to:) beyond its bytes")
    count = newCount
  }
}
