// ParentGoOn.swift — the parent's "go on" to a child that holds still: SIGUSR1, blocked in every
// thread (blockGoOnSignal, called before the client starts its own threads) and taken only by
// sigwait (waitForGoOn), so it runs no handler and ends nothing. Used by the hang, pool and
// operation-hang scenarios.

#if canImport(Glibc)
  import Glibc
#endif

/// Blocks SIGUSR1 in this thread and every thread started after it (the client's included), so
/// that only sigwait takes it.
func blockGoOnSignal() {
  var set = sigset_t()
  sigemptyset(&set)
  sigaddset(&set, SIGUSR1)
  pthread_sigmask(SIG_BLOCK, &set, nil)
}

/// Waits for the parent's SIGUSR1. Always inlined, so a named function that only calls it
/// (stallLoopBlockedOnParent, operationBlockedOnParent) stays on the stack the report shows.
@inline(__always) func waitForGoOn() {
  var set = sigset_t()
  sigemptyset(&set)
  sigaddset(&set, SIGUSR1)
  var taken: Int32 = 0
  while sigwait(&set, &taken) != 0 {}
}
