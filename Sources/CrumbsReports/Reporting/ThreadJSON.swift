// ThreadJSON.swift — a report's thread (`CrashReport.Thread`) written through the one JSON
// writer, with the keys its Codable conformance uses in report.json, so a reader decodes either
// with the same type (`crumbs threads --json`). Absent optionals are left out, as the encoder
// leaves them out. Not signal-safe.

import CrumbsRecorder

package enum ThreadJSON {
  /// Writes `thread`'s fields into `object`.
  package static func write(_ thread: CrashReport.Thread, into object: inout JSONObject) {
    object.field("id", thread.id)
    if let name = thread.name { object.field("name", name) }
    object.field("state", thread.state.rawValue)
    object.field("crashed", thread.crashed)
    if let signal = thread.signal { object.field("signal", signal) }
    if let registers = thread.registers {
      object.array("registers") { array in
        for register in registers {
          array.object { entry in
            entry.field("name", register.name)
            entry.field("value", register.value)
          }
        }
      }
    }
    object.array("frames") { array in
      for frame in thread.frames { array.object { write(frame, into: &$0) } }
    }
    if let reasons = thread.notSignalled {
      object.array("notSignalled") { array in
        for reason in reasons { array.append(reason) }
      }
    }
    if let call = thread.blockedSystemCall { object.field("blockedSystemCall", call) }
    if let wait = thread.wait { object.object("wait") { write(wait, into: &$0) } }
  }

  /// Writes `wait`'s fields into `object` (ThreadWait's Codable keys, in sorted order as
  /// report.json keeps them).
  package static func write(_ wait: ThreadWait, into object: inout JSONObject) {
    if let arguments = wait.arguments {
      object.array("arguments") { array in
        for argument in arguments { array.append(argument) }
      }
    }
    if let address = wait.lockAddress { object.field("lockAddress", address) }
    if let kind = wait.lockKind { object.field("lockKind", kind.rawValue) }
    if let lock = wait.lockObject { object.field("lockObject", lock) }
    if let owner = wait.owner { object.field("owner", owner) }
    if let unknown = wait.ownerUnknown { object.field("ownerUnknown", unknown) }
    if let readers = wait.readers { object.field("readers", readers) }
    if let state = wait.state { object.field("state", state) }
    if let call = wait.systemCall { object.field("systemCall", call) }
    if let name = wait.systemCallName { object.field("systemCallName", name) }
    object.field("threadID", wait.threadID)
    if let write = wait.wantsToWrite { object.field("wantsToWrite", write) }
  }

  /// Writes `frame`'s fields into `object`.
  package static func write(_ frame: CrashReport.Frame, into object: inout JSONObject) {
    object.field("index", frame.index)
    object.field("address", frame.address)
    if let module = frame.module { object.field("module", module) }
    if let offset = frame.moduleOffset { object.field("moduleOffset", offset) }
    if let buildID = frame.buildID { object.field("buildID", buildID) }
    if let function = frame.function { object.field("function", function) }
    if let symbol = frame.symbol { object.field("symbol", symbol) }
    if let offset = frame.symbolOffset { object.field("symbolOffset", offset) }
    if let file = frame.file { object.field("file", file) }
    if let line = frame.line { object.field("line", line) }
    if let column = frame.column { object.field("column", column) }
    if let note = frame.note { object.field("note", note) }
    if let origin = frame.foundBy { object.field("foundBy", origin.rawValue) }
    if let inlined = frame.inlined { object.field("inlined", inlined) }
  }
}
