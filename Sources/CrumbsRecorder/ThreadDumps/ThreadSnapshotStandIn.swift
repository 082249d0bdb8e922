// ThreadSnapshotStandIn.swift — TEMPORARY: the shape of the live capture that branch i23-capture
// builds (ThreadSnapshot, LiveThreadCapture), declared here only so the thread-dump request, answer
// and CLI compile before it is merged. Deleted by that merge; it captures nothing.

package struct ThreadSnapshot: Sendable, Equatable, Codable {
  package var table: CrashRecord.ThreadTable
  package var callerID: UInt32
  package var wallNanoseconds: UInt64
  package var longestPauseNanoseconds: UInt64
  package var modules: [LoadedModule]
}

package struct LiveThreadCaptureError: Error, Equatable, CustomStringConvertible {
  package var description: String { "no live capture in this build" }
}

package enum LiveThreadCapture {
  package static func capture() throws(LiveThreadCaptureError) -> ThreadSnapshot {
    throw LiveThreadCaptureError()
  }
}
