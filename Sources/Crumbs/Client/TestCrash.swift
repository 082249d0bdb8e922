// TestCrash.swift — crashing on purpose, in every way the crash handler must catch, so an app
// (and the demo, and the tests) can check its whole crash pipeline end to end.

import CrumbsPlatform

#if canImport(Glibc)
  import Glibc
#endif

/// A way to crash.
public enum CrashKind: String, CaseIterable, Sendable {
  /// Write through a null pointer: SIGSEGV, SEGV_MAPERR at 0x0.
  case nullDereference = "null-deref"
  /// `fatalError()`: a Swift trap (SIGILL on x86_64, SIGTRAP on aarch64).
  case fatalError = "fatal-error"
  /// `precondition(false)`.
  case precondition
  /// Force-unwrapping nil.
  case forceUnwrap = "force-unwrap"
  /// Array index out of range.
  case bounds
  /// Integer overflow.
  case overflow
  /// Integer division by zero (a Swift trap, checked before the CPU would fault).
  case divideByZero = "divide-by-zero"
  /// `abort()`: SIGABRT.
  case abort
  /// Unbounded recursion on the main thread: SIGSEGV on the guard page.
  case stackOverflow = "stack-overflow"
  /// A null dereference on a secondary thread while the main thread waits.
  case threadSegv = "thread-segv"
  /// `kill -9` of itself: no handler can run; the next launch reports an abnormal termination.
  case kill9
}

/// Crashes the process now, the way `kind` says. Never returns.
public func generateTestCrash(kind: CrashKind) -> Never {
  switch kind {
  case .nullDereference:
    TestCrash.writeThroughNull()
  case .fatalError:
    Swift.fatalError("generateTestCrash(kind: .fatalError)")
  case .precondition:
    Swift.precondition(TestCrash.opaqueFalse(), "generateTestCrash(kind: .precondition)")
  case .forceUnwrap:
    let missing: Int? = TestCrash.opaqueFalse() ? 1 : nil
    TestCrash.sink(missing!)
  case .bounds:
    let values = [1, 2, 3]
    TestCrash.sink(values[TestCrash.opaque(3)])
  case .overflow:
    TestCrash.sink(Int.max + TestCrash.opaque(1))
  case .divideByZero:
    TestCrash.sink(42 / TestCrash.opaque(0))
  case .abort:
    Glibc.abort()
  case .stackOverflow:
    TestCrash.sink(TestCrash.recurse(1))
  case .threadSegv:
    (try? BackgroundThread.startJoinable(name: "crumbs.crash") { TestCrash.writeThroughNull() })?.join()
  case .kill9:
    Glibc.kill(getpid(), SIGKILL)
  }
  // Only reached if a chained handler swallowed the signal.
  Glibc.abort()
}

enum TestCrash {
  @inline(never)
  static func writeThroughNull() -> Never {
    let pointer = UnsafeMutablePointer<Int>(bitPattern: opaque(0) | 0)
    // Optional-typed pointer made non-optional without a check: a real wild write.
    unsafeBitCast(pointer, to: UnsafeMutablePointer<Int>.self).pointee = 42
    Glibc.abort()
  }

  @inline(never)
  static func recurse(_ depth: Int) -> Int {
    var frame = (depth, depth, depth, depth, depth, depth, depth, depth)
    return withUnsafeMutablePointer(to: &frame) { pointer in
      recurse(depth + 1) + pointer.pointee.0
    }
  }

  /// Values the optimizer cannot see through, so the crash happens at run time.
  @inline(never) static func opaque(_ value: Int) -> Int { value }
  @inline(never) static func opaqueFalse() -> Bool { getpid() == 0 }
  @inline(never) static func sink(_ value: Int) -> Never {
    print(value)
    Glibc.abort()
  }
}
