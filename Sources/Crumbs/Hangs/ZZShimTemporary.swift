// TEMPORARY: stands in for the helpers' APIs until merged. Never committed.
extension BreadcrumbRing {
  func recordHang(watch: String, sinceWallNanoseconds: UInt64, frames: String) {}
  func refreshHang(seenWallNanoseconds: UInt64) {}
  func clearHang() {}
}
struct ThreadSnapshotShim { var modules: [LoadedModule] = [] }
struct ShimError: Error {}
enum LiveThreadCapture { static func capture() throws -> ThreadSnapshotShim { throw ShimError() } }
enum LiveThreads { static func reportThreads(_ s: ThreadSnapshotShim, symbolicator: LiveSymbolicator) -> [CrashReport.Thread] { [] } }
