// SharedLibraries.swift — small C libraries tests build with the system's cc: an LD_PRELOAD
// malloc guard, a plugin the test child loads after Crumbs started.

import CrumbsPlatform

@testable import CrumbsRecorder

/// cc failed; what it printed.
package struct CompileError: Error, CustomStringConvertible {
  package var output: String
  package var description: String { "cc failed: \(output)" }
}

/// Writes `source` to `<name>.c` in `directory` and compiles it into `lib<name>.so` there
/// (position-independent, frame pointers kept, with `flags`). Returns the library's path.
package func compileSharedLibrary(
  _ source: String, named name: String, in directory: TestDirectory, flags: String = "-O1"
) throws -> String {
  let sourcePath = directory.file(name + ".c")
  let library = directory.file("lib\(name).so")
  try Syscall.writeFileAtomically(sourcePath, Array(source.utf8))
  let log = directory.file(name + ".cc.txt")
  let compile = try Subprocess(
    "/bin/sh",
    ["-c", "cc -shared -fPIC -fno-omit-frame-pointer \(flags) -o '\(library)' '\(sourcePath)' -ldl"],
    environment: [:], standardError: .file(log))
  compile.wait(seconds: 120)
  guard compile.status == 0 else {
    throw CompileError(
      output: (try? Syscall.readFile(log)).map { String(decoding: $0, as: UTF8.self) } ?? "")
  }
  return library
}

/// A library the test child loads with dlopen after the crash handler recorded its modules
/// (scenario `dlopen-crash`): `crumbs_plugin_crash` calls `crumbs_plugin_store`, which stores to
/// address 0. Built at -O0 so both keep their frames and the store stays a store.
package let pluginSource = """
  __attribute__((noinline)) int crumbs_plugin_store(volatile int *target) {
    *target = 42;
    return *target;
  }
  __attribute__((noinline)) int crumbs_plugin_crash(void) {
    return crumbs_plugin_store((volatile int *)0) + 1;
  }
  """

/// Another library of the same shape (names of the same length, so the same size): loaded after
/// the first was unloaded, the dynamic linker usually maps it at the address the first had
/// (scenario `dlclose-reload`).
package let otherPluginSource = """
  __attribute__((noinline)) int crumbs_plugix_store(volatile int *target) {
    *target = 43;
    return *target;
  }
  __attribute__((noinline)) int crumbs_plugix_crash(void) {
    return crumbs_plugix_store((volatile int *)0) + 2;
  }
  """
