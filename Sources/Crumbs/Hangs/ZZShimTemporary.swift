// TEMPORARY: stands in for the helpers' APIs until merged. Never committed.
struct ThreadSnapshotShim { var modules: [LoadedModule] = [] }
struct ShimError: Error {}
enum LiveThreadCapture { static func capture() throws -> ThreadSnapshotShim { throw ShimError() } }
enum LiveThreads {
  static func reportThreads(_ s: ThreadSnapshotShim, symbolicator: LiveSymbolicator) -> [CrashReport.Thread] {
    []
  }
}
