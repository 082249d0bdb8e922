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

/// A library with a SIGSEGV handler that gives up the way Go's c-shared runtime and many
/// libraries do (scenario `library-handler-raises`): it puts the default action back without
/// going through Crumbs' `sigaction` — with libc's `signal()` (what a shared library calls when
/// the executable does not export `signal`, which the test child happens to: found here with
/// `dlsym(RTLD_NEXT)`) or, `mode` 1, with a raw rt_sigaction system call, as Go's runtime
/// does — and raises the signal. It writes "library-handler" first (write(2) only).
package let resettingHandlerLibrarySource = """
  #define _GNU_SOURCE
  #include <dlfcn.h>
  #include <signal.h>
  #include <string.h>
  #include <sys/syscall.h>
  #include <unistd.h>

  static int crumbs_library_mode;
  static sighandler_t (*crumbs_library_libc_signal)(int, sighandler_t);

  /// The kernel's struct sigaction for rt_sigaction: handler, flags, restorer, mask.
  struct crumbs_kernel_sigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    unsigned long mask;
  };

  static void crumbs_library_handler(int signal_number) {
    (void)!write(1, "library-handler\\n", 16);
    if (crumbs_library_mode == 1) {
      struct crumbs_kernel_sigaction action;
      memset(&action, 0, sizeof action); /* SIG_DFL */
      syscall(SYS_rt_sigaction, signal_number, &action, NULL, 8);
    } else {
      crumbs_library_libc_signal(signal_number, SIG_DFL);
    }
    raise(signal_number);
  }

  int crumbs_library_install(int signal_number, int mode) {
    crumbs_library_mode = mode;
    crumbs_library_libc_signal = (sighandler_t (*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
    if (crumbs_library_libc_signal == NULL) return -1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = crumbs_library_handler;
    action.sa_flags = SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    return sigaction(signal_number, &action, NULL);
  }
  """

/// A library with a SIGSEGV handler that recovers, the way a runtime's does (scenario
/// `library-runtime-recovers`): `crumbs_runtime_fault` protects a page of its own and stores
/// into it; the handler makes the page writable again and returns (the store then runs). A
/// fault elsewhere it gives up on, putting the default action back. Built as
/// `libsigsegv_…` it is in a module Crumbs recognises as a runtime's; under another name, not.
package let recoveringRuntimeLibrarySource = """
  #define _GNU_SOURCE
  #include <signal.h>
  #include <string.h>
  #include <sys/mman.h>
  #include <unistd.h>

  static char *crumbs_runtime_page;
  static long crumbs_runtime_page_size;
  static volatile int crumbs_runtime_recovered_count;

  static void crumbs_runtime_handler(int signal_number, siginfo_t *info, void *context) {
    (void)context;
    char *address = (char *)info->si_addr;
    if (address >= crumbs_runtime_page && address < crumbs_runtime_page + crumbs_runtime_page_size) {
      mprotect(crumbs_runtime_page, (size_t)crumbs_runtime_page_size, PROT_READ | PROT_WRITE);
      crumbs_runtime_recovered_count++;
      return;
    }
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigaction(signal_number, &fallback, NULL);
  }

  int crumbs_runtime_install(int signal_number) {
    crumbs_runtime_page_size = sysconf(_SC_PAGESIZE);
    void *page = mmap(NULL, (size_t)crumbs_runtime_page_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return -1;
    crumbs_runtime_page = page;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = crumbs_runtime_handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    return sigaction(signal_number, &action, NULL);
  }

  void crumbs_runtime_fault(int value) {
    mprotect(crumbs_runtime_page, (size_t)crumbs_runtime_page_size, PROT_NONE);
    *(volatile int *)crumbs_runtime_page = value;
  }

  int crumbs_runtime_recovered(void) { return crumbs_runtime_recovered_count; }
  unsigned long crumbs_runtime_page_address(void) { return (unsigned long)crumbs_runtime_page; }
  """
