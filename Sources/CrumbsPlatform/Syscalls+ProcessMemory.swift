// Syscalls+ProcessMemory.swift — checked reads of this process's own memory at an address that
// came from elsewhere (another thread's system call arguments): process_vm_readv on our own pid,
// which fails with EFAULT on an unmapped or unreadable address instead of faulting. The only way
// Crumbs reads a word whose address it did not make itself. Not signal-safe.

import SystemPackage

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// process_vm_readv (<sys/uio.h>, which the Glibc module leaves out); the same in musl.
@_silgen_name("process_vm_readv")
private func processVMReadv(
  _ pid: pid_t, _ local: UnsafePointer<iovec>, _ localCount: UInt, _ remote: UnsafePointer<iovec>,
  _ remoteCount: UInt, _ flags: UInt
) -> Int

extension Syscall {
  /// Copies `buffer.count` bytes of this process's memory at `address` into `buffer`, through
  /// the kernel: an address that is not mapped readable gives an error (EFAULT), never a fault.
  /// A short read (the range crosses into an unmapped page) is refused.
  package static func readOwnMemory(at address: UInt64, into buffer: UnsafeMutableRawBufferPointer)
    throws(SystemCallError)
  {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    guard let remoteBase = UnsafeMutableRawPointer(bitPattern: UInt(truncatingIfNeeded: address)) else {
      throw SystemCallError(call: "process_vm_readv", errno: .badAddress)
    }
    var local = iovec(iov_base: base, iov_len: buffer.count)
    var remote = iovec(iov_base: remoteBase, iov_len: buffer.count)
    let count = try retrying("process_vm_readv") {
      processVMReadv(getpid(), &local, 1, &remote, 1, 0)
    }
    if count != buffer.count {
      throw SystemCallError(
        call: "process_vm_readv", refusal: .other("read \(count) of \(buffer.count) bytes"))
    }
  }
}
