// CurrentProcessModules+Linux.swift — the module map of the running process.
//
// Entry point: CurrentProcessModules.list() → dl_iterate_phdr → one LoadedModule per object
// with loaded segments: its load bias, PT_LOAD ranges, and the GNU build ID read from its
// PT_NOTE segments in memory (already mapped, so no file is opened). The main executable, which
// the dynamic linker names "", is given the path /proc/self/exe resolves to.
//
// For non-fatal reports (symbolicate the current backtrace), live thread captures (what their
// frames are relative to: LiveThreadCapture) and tests. In the recorder, beside CurrentThread,
// so a capture carries it without the reports. The crash handler keeps its own copy of this map
// in the crash record (crumbs_modules.c), made the same way.
// Not signal-safe (dl_iterate_phdr takes the loader lock; allocates).

import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

/// The modules loaded in this process.
public enum CurrentProcessModules {
  /// Every loaded object with at least one PT_LOAD segment, in the dynamic linker's order (the
  /// main executable first). Empty if `dl_iterate_phdr` cannot be found.
  public static func list() -> [LoadedModule] {
    guard let iterate = iteratePhdr else { return [] }
    var collected: [LoadedModule] = []
    withUnsafeMutablePointer(to: &collected) { pointer in
      _ = iterate(
        { info, size, context in
          guard let info, let context else { return 0 }
          let modules = context.assumingMemoryBound(to: [LoadedModule].self)
          if let module = CurrentProcessModules.module(info, size: size, isFirst: modules.pointee.isEmpty) {
            modules.pointee.append(module)
          }
          return 0
        }, pointer)
    }
    return collected
  }

  /// int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data)
  typealias IteratePhdr =
    @convention(c) (
      @convention(c) (UnsafeRawPointer?, Int, UnsafeMutableRawPointer?) -> Int32, UnsafeMutableRawPointer?
    ) -> Int32

  /// <link.h> does not import into Swift's Glibc module, so the function is found with dlsym and
  /// `struct dl_phdr_info` read at its fixed offsets (below).
  static let iteratePhdr: IteratePhdr? = dlsym(nil, "dl_iterate_phdr").map {
    unsafeBitCast($0, to: IteratePhdr.self)
  }

  /// Reads one `struct dl_phdr_info` (LP64 glibc and musl: dlpi_addr at 0, dlpi_name at 8,
  /// dlpi_phdr at 16, dlpi_phnum (uint16) at 24), only when the `size` the loader passes covers
  /// those fields.
  static func module(_ info: UnsafeRawPointer, size: Int, isFirst: Bool) -> LoadedModule? {
    guard size >= 26 else { return nil }
    let bias = info.load(fromByteOffset: 0, as: UInt64.self)
    let name = info.load(fromByteOffset: 8, as: UnsafePointer<CChar>?.self)
    guard let headers = info.load(fromByteOffset: 16, as: UnsafePointer<Elf64_Phdr>?.self) else { return nil }
    let headerCount = Int(info.load(fromByteOffset: 24, as: UInt16.self))
    var low = UInt64.max
    var high: UInt64 = 0
    var textLow = UInt64.max
    var textHigh: UInt64 = 0
    var buildID: [UInt8] = []
    for index in 0..<headerCount {
      let header = headers[index]
      let start = bias &+ UInt64(header.p_vaddr)
      let end = start &+ UInt64(header.p_memsz)
      if header.p_type == UInt32(PT_LOAD) {
        low = min(low, start)
        high = max(high, end)
        if header.p_flags & UInt32(PF_X) != 0 {
          textLow = min(textLow, start)
          textHigh = max(textHigh, end)
        }
      } else if header.p_type == UInt32(PT_NOTE), buildID.isEmpty, header.p_memsz > 0,
        header.p_memsz < 1 << 20,
        let notes = UnsafeRawPointer(bitPattern: UInt(start))
      {
        let bytes = Array(UnsafeRawBufferPointer(start: notes, count: Int(header.p_memsz)))
        buildID = LoadedModule.buildID(inNotes: bytes, alignment: UInt64(header.p_align)) ?? []
      }
    }
    guard high > 0 else { return nil }
    var path = name.map { String(cString: $0) } ?? ""
    if path.isEmpty && isFirst { path = Syscall.readLink("/proc/self/exe") ?? "/proc/self/exe" }
    return LoadedModule(
      path: path, loadBias: bias, buildID: buildID, start: low, end: high,
      textStart: textLow == UInt64.max ? 0 : textLow, textEnd: textHigh)
  }
}
