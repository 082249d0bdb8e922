// CrashReport+JSON.swift — report.json's bytes (docs/formats.md), written by hand through the one
// JSON writer: `JSONEncoder` took about a third of the store step's CPU on every report. The
// text is what `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` wrote from
// the `Codable` form (which stays: `ReportStore.decode` reads with `JSONDecoder`): compact, keys
// in the byte order of their UTF-8 (each object's fixed keys are written in that order here; the
// app's `resource` and `attributes` keys are sorted), nil optionals left out, slashes as they
// are, `LoadedModule` and `AttributeValue` as their own `encode(to:)` write them.
//
// Where the bytes differ, the values do not (JSONWriter's conventions, kept for every file it
// writes): a finite double attribute keeps its point (`{"double":4.0}`, JSONEncoder wrote `4`:
// the point is what tells other readers it is a double, the reason for the wrapper), and
// backspace, form feed and DEL are written `\u0008`, `\u000c`, `\u007f` (JSONEncoder: `\b`, `\f`,
// DEL raw). ReportJSONTests holds the rest byte for byte to JSONEncoder's output, and every key
// to the `Codable` form by decoding. Not signal-safe (allocates).

import CrumbsRecorder

extension CrashReport {
  /// report.json's bytes: see the file comment.
  package var jsonBytes: [UInt8] {
    // Room for a typical report at once (the buffer doubles past it).
    let frameCount = frames.count + (threads ?? []).reduce(0) { $0 + $1.frames.count }
    var json = JSONWriter(
      reservingCapacity: 1024 + 256 * (frameCount + modules.count) + exceptionStacktrace.utf8.count)
    json.object { writeFields(into: &$0) }
    return json.bytes
  }

  /// The fields, keys in UTF-8 byte order (`.` sorts before letters and `_`, so `thread.id`,
  /// `thread.name`, then `threads`).
  private func writeFields(into report: inout JSONObject) {
    report.array("attachments") { list in
      for attachment in attachments { list.object { attachment.write(into: &$0) } }
    }
    report.object("attributes") { object in
      for (key, value) in Self.sorted(attributes) { value.write(key, into: &object) }
    }
    report.object("breadcrumbs") { breadcrumbs.write(into: &$0) }
    if let handlerDurationNanoseconds {
      report.field("crumbs.handler_duration_ns", handlerDurationNanoseconds)
    }
    if let openOperations { report.object("crumbs.open_operations") { openOperations.write(into: &$0) } }
    if let reportingSessionID { report.field("crumbs.reporting_session.id", reportingSessionID) }
    if let threadsNotRecorded { report.field("crumbs.threads_not_recorded", threadsNotRecorded) }
    if let trace { report.object("crumbs.trace") { trace.write(into: &$0) } }
    if let traceBreadcrumb { report.object("crumbs.trace.breadcrumb") { traceBreadcrumb.write(into: &$0) } }
    report.array("damage") { list in for text in damage { list.append(text) } }
    report.array("evidence") { list in for text in evidence { list.append(text) } }
    report.field("exception.message", exceptionMessage)
    report.field("exception.stacktrace", exceptionStacktrace)
    report.field("exception.type", exceptionType)
    report.array("frames") { Frame.write(frames, into: &$0) }
    report.field("kind", kind.rawValue)
    report.array("modules") { list in
      for module in modules { list.object { Self.write(module, into: &$0) } }
    }
    report.field("observed_time", observedTime)
    report.field("observed_time_unix_nano", observedTimeUnixNano)
    report.array("registers") { Register.write(registers, into: &$0) }
    report.field("report.id", id)
    report.object("resource") { object in
      for (key, value) in Self.sorted(resource) { object.field(key, value) }
    }
    report.field("session.id", sessionID)
    if let signal { report.object("signal") { signal.write(into: &$0) } }
    if let threadID { report.field("thread.id", threadID) }
    if let threadName { report.field("thread.name", threadName) }
    if let threads {
      report.array("threads") { list in
        for thread in threads { list.object { thread.write(into: &$0) } }
      }
    }
    report.field("time", time)
    report.field("time_unix_nano", timeUnixNano)
  }

  /// A dictionary's entries in the order JSONEncoder's `.sortedKeys` writes them: by the keys'
  /// UTF-8 bytes (not `String`'s `<`, which compares Unicode scalars after normalization).
  private static func sorted<Value>(_ dictionary: [String: Value]) -> [(key: String, value: Value)] {
    dictionary.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
  }

  /// A module as `LoadedModule.encode(to:)` writes it: addresses as hex strings, the build ID
  /// only when known, the two flags only when true.
  private static func write(_ module: LoadedModule, into object: inout JSONObject) {
    if !module.buildID.isEmpty { object.field("buildID", module.buildIDHex) }
    object.field("end", LoadedModule.hexAddress(module.end))
    if module.foundAtCrash { object.field("foundAtCrash", true) }
    object.field("loadAddress", LoadedModule.hexAddress(module.loadBias))
    object.field("path", module.path)
    object.field("start", LoadedModule.hexAddress(module.start))
    object.field("textEnd", LoadedModule.hexAddress(module.textEnd))
    object.field("textStart", LoadedModule.hexAddress(module.textStart))
    if module.unloaded { object.field("unloaded", true) }
  }
}

extension CrashReport.Attachment {
  fileprivate func write(into object: inout JSONObject) {
    object.field("contentType", contentType)
    object.field("name", name)
    if let omittedReason { object.field("omittedReason", omittedReason) }
    object.field("size", size)
  }
}

extension CrashReport.Trail {
  fileprivate func write(into object: inout JSONObject) {
    if let attachment { object.field("attachment", attachment) }
    object.field("count", count)
    object.field("empty", empty)
    if let lastMessage { object.field("lastMessage", lastMessage) }
    object.field("overwritten", overwritten)
    object.field("timesCalibrated", timesCalibrated)
    object.field("torn", torn)
    object.field("valid", valid)
  }
}

extension CrashReport.Frame {
  fileprivate static func write(_ frames: [Self], into list: inout JSONArray) {
    for frame in frames { list.object { frame.write(into: &$0) } }
  }

  private func write(into object: inout JSONObject) {
    object.field("address", address)
    if let buildID { object.field("buildID", buildID) }
    if let column { object.field("column", column) }
    if let file { object.field("file", file) }
    if let foundBy { object.field("foundBy", foundBy.rawValue) }
    if let function { object.field("function", function) }
    object.field("index", index)
    if let inlined { object.field("inlined", inlined) }
    if let line { object.field("line", line) }
    if let module { object.field("module", module) }
    if let moduleOffset { object.field("moduleOffset", moduleOffset) }
    if let note { object.field("note", note) }
    if let source { object.object("source") { source.write(into: &$0) } }
    if let symbol { object.field("symbol", symbol) }
    if let symbolOffset { object.field("symbolOffset", symbolOffset) }
  }
}

extension CrashReport.SourceLines {
  fileprivate func write(into object: inout JSONObject) {
    object.array("lines") { list in for line in lines { list.append(line) } }
    if let newerThanModule { object.field("newerThanModule", newerThanModule) }
    object.field("origin", origin)
    object.field("startLine", startLine)
  }
}

extension CrashReport.Register {
  fileprivate static func write(_ registers: [Self], into list: inout JSONArray) {
    for register in registers {
      list.object { object in
        object.field("name", register.name)
        object.field("value", register.value)
      }
    }
  }
}

extension CrashReport.SignalInfo {
  fileprivate func write(into object: inout JSONObject) {
    object.field("code", code)
    object.field("codeName", codeName)
    object.field("faultAddress", faultAddress)
    object.field("name", name)
    object.field("number", number)
    if let senderPID { object.field("senderPID", senderPID) }
    if let senderUID { object.field("senderUID", senderUID) }
  }
}

extension CrashReport.Thread {
  fileprivate func write(into object: inout JSONObject) {
    if let blockedSystemCall { object.field("blockedSystemCall", blockedSystemCall) }
    object.field("crashed", crashed)
    object.array("frames") { CrashReport.Frame.write(frames, into: &$0) }
    object.field("id", id)
    if let name { object.field("name", name) }
    if let notSignalled {
      object.array("notSignalled") { list in
        for reason in notSignalled { list.append(reason) }
      }
    }
    if let registers { object.array("registers") { CrashReport.Register.write(registers, into: &$0) } }
    if let signal { object.field("signal", signal) }
    object.field("state", state.rawValue)
    if let wait { object.object("wait") { ThreadJSON.write(wait, into: &$0) } }
  }
}

extension CrashReport.OpenOperations {
  /// As report.json holds it (`crumbs.open_operations`); `crumbs threads --json` too.
  package func write(into object: inout JSONObject) {
    object.field("capacity", capacity)
    if let damage { object.field("damage", damage) }
    object.field("not_held", notHeld)
    object.array("operations") { list in
      for operation in operations { list.object { operation.write(into: &$0) } }
    }
    object.field("unreadable", unreadable)
  }
}

extension CrashReport.OpenOperations.Operation {
  package func write(into object: inout JSONObject) {
    object.field("age_ns", ageNanoseconds)
    object.array("attributes") { list in
      for attribute in attributes {
        list.object {
          $0.field("key", attribute.key)
          $0.field("value", attribute.value)
        }
      }
    }
    object.field("kind", kind)
    object.field("name", name)
    if let onCrashingThread { object.field("on_crashing_thread", onCrashingThread) }
    if let parentSpanID { object.field("parent_span_id", parentSpanID) }
    if let spanID { object.field("span_id", spanID) }
    object.field("start_time", startTime)
    object.field("start_time_unix_nano", startTimeUnixNano)
    object.field("thread.id", threadID)
    if let traceID { object.field("trace_id", traceID) }
  }
}

extension CrashReport.TraceBreadcrumb {
  fileprivate func write(into object: inout JSONObject) {
    object.field("message", message)
    object.field("threadID", threadID)
    object.field("threadSequence", threadSequence)
    object.field("time", time)
  }
}

extension TraceContext {
  fileprivate func write(into object: inout JSONObject) {
    object.field("flags", flags)
    object.field("spanID", spanID)
    object.field("traceID", traceID)
  }
}

extension AttributeValue {
  /// As `encode(to:)` writes it: see AttributeValue.swift's file comment.
  fileprivate func write(_ key: String, into object: inout JSONObject) {
    switch self {
    case .string(let text): object.field(key, text)
    case .bool(let flag): object.field(key, flag)
    case .int(let number): object.field(key, number)
    case .double(let number) where number.isFinite: object.object(key) { $0.field("double", number) }
    case .double: object.field(key, text)
    }
  }
}
