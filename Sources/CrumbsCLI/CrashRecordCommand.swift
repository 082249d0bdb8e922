// CrashRecordCommand.swift — `crumbs crash-record …`: read crash record files.
//
// Subcommands:
//   crash-record dump FILE [--json]   everything the handler recorded: status, signal and code,
//                                     fault address, sender, thread, times, registers, raw
//                                     frames (with the module each falls in), modules
// Not signal-safe (an ordinary command-line program).

import ArgumentParser
import Crumbs

#if canImport(Glibc)
  import Glibc
#endif

struct CrashRecordCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "crash-record", abstract: "Read crash record files.",
    subcommands: [CrashRecordDumpCommand.self])
}

struct CrashRecordDumpCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "dump", abstract: "Print a crash record (`<session>.crash`).")

  @Argument(help: "The crash record file.")
  var file: String

  @Flag(help: "One JSON object instead of text.")
  var json = false

  func run() throws {
    let record: CrashRecord
    do {
      record = try CrashRecord.read(file: file)
    } catch {
      throw fail("crash-record dump", "\(error)")
    }
    print(json ? CrashRecordText.json(record) : CrashRecordText.human(record))
  }
}

/// How a crash record is printed.
enum CrashRecordText {
  static func hex(_ value: UInt64) -> String { "0x" + String(value, radix: 16) }

  static func frameLine(_ record: CrashRecord, index: Int, address: UInt64) -> String {
    // Return addresses point after the call: look up address - 1 for every frame but the first
    // and async resume points (a function's first instruction).
    let exact = index == 0 || (index < record.frameMarks.count && record.frameMarks[index].contains(.async))
    let lookup = exact ? address : address &- 1
    var line = "  #\(index) " + hex(address)
    if let module = record.module(containing: lookup) {
      let name = module.path.split(separator: "/").last.map(String.init) ?? module.path
      line += "  \(name) + " + hex(address &- module.loadBias)
    } else {
      line += "  ?"
    }
    if index < record.frameMarks.count, let origin = CrashReport.FrameOrigin(record.frameMarks[index]) {
      line += "  {\(origin.rawValue)}"
    }
    return line
  }

  static func human(_ record: CrashRecord) -> String {
    var lines: [String] = []
    lines.append("status      \(record.status.rawValue)")
    lines.append("session     \(record.sessionID)  pid \(record.pid)")
    guard record.status != .noCrash else { return lines.joined(separator: "\n") }
    let signal = record.signal
    lines.append(
      "signal      \(signal.number) \(signal.name)  code \(signal.code) \(signal.codeName)")
    lines.append("address     \(hex(signal.faultAddress))")
    if let pid = signal.senderPID {
      lines.append("sender      pid \(pid) uid \(signal.senderUID ?? 0)")
    }
    lines.append("thread      \(record.threadID) \"\(record.threadName)\"")
    if record.threadsCrashed > 1 { lines.append("crashed     \(record.threadsCrashed) threads") }
    if let message = record.swiftFatalMessage {
      lines.append("swift       \(message)" + (record.swiftFatalMessageTruncated ? " [cut]" : ""))
    }
    if let exception = record.uncaughtException {
      lines.append(
        "exception   \(exception.mangledType)" + (exception.what.map { ": \($0)" } ?? "")
          + (exception.truncated ? " [cut]" : ""))
    }
    if let nested = record.nestedSignal {
      lines.append(
        "partial     the handler crashed: signal \(nested) code \(record.nestedSignalCode ?? 0) at \(hex(record.nestedFaultAddress ?? 0))"
      )
    }
    lines.append("time        \(record.crashWallNanoseconds) ns since epoch")
    lines.append("uptime      \(record.processUptimeNanoseconds / 1_000_000) ms")
    lines.append(
      "memory      \(record.freeMemoryBytes >> 20) MiB free of \(record.totalMemoryBytes >> 20) MiB")
    lines.append("handler     \(record.handlerDurationNanoseconds) ns")
    lines.append(
      "stack       \(hex(record.stackLow))-\(hex(record.stackHigh)) (\(record.stackSource.rawValue))")
    var flags: [String] = []
    if record.ranOnAlternateStack { flags.append("alternate-stack") }
    if record.leafFrameInserted { flags.append("leaf-frame-inserted") }
    if record.modulesStale { flags.append("modules-stale") }
    if record.modulesTorn { flags.append("modules-torn") }
    if record.concurrentCrash { flags.append("concurrent-crash") }
    if !flags.isEmpty { lines.append("flags       " + flags.joined(separator: " ")) }
    lines.append("registers   (\(record.architecture))")
    for chunk in stride(from: 0, to: record.registers.count, by: 3) {
      let row = record.registers[chunk..<min(chunk + 3, record.registers.count)]
      lines.append(
        "  " + row.map { $0.name.padding(7) + " " + hex($0.value).padding(19) }.joined(separator: " "))
    }
    lines.append("frames      \(record.frames.count) (stop: \(record.backtraceStop.rawValue))")
    for (index, frame) in record.frames.enumerated() {
      lines.append(frameLine(record, index: index, address: frame))
    }
    if let table = record.threads {
      lines.append(
        "threads     \(table.threads.count) listed of \(table.seen), \(table.captured) captured, "
          + "\(table.noAnswer) did not answer (signal \(table.captureSignal), "
          + "\(table.captureNanoseconds) ns, deadline \(table.deadlineNanoseconds) ns"
          + (table.threadsEnded ? "; nothing chained: they ended once they answered)" : "")
          + (table.threadsKeptForDump ? "; kept parked for the core dump or the tracer)" : "")
          + (table.threadsKeptForChain
            ? "; kept parked while the chained handlers ran, until the death)" : "")
          + (table.threadsEnded || table.threadsKeptForDump || table.threadsKeptForChain ? "" : ")"))
      for thread in table.threads {
        var heading = "  \(thread.id) \"\(thread.name)\" \(thread.state.rawValue)"
        if let signal = thread.signal, thread.state == .alsoCrashed { heading += " signal \(signal)" }
        if thread.state == .crashing {
          lines.append(heading + " (frames above)")
          continue
        }
        if !thread.frames.isEmpty {
          heading +=
            "  \(thread.frames.count) frames (stop: \(thread.backtraceStop.rawValue), stack \(thread.stackSource.rawValue))"
        }
        lines.append(heading)
        for (index, frame) in thread.frames.enumerated() {
          lines.append("  " + frameLine(record, index: index, address: frame))
        }
      }
    }
    lines.append("modules     \(record.modules.count)")
    for module in record.modules {
      lines.append(
        "  \(hex(module.start))-\(hex(module.end)) bias \(hex(module.loadBias)) \(module.buildIDHex.isEmpty ? "-" : module.buildIDHex) \(module.path)"
      )
    }
    return lines.joined(separator: "\n")
  }

  static func json(_ record: CrashRecord) -> String {
    var json = JSONWriter()
    json.object { object in
      object.field("status", record.status.rawValue)
      object.field("session", "\(record.sessionID)")
      object.field("pid", record.pid)
      object.field("signal", record.signal.number)
      object.field("signal_name", record.signal.name)
      object.field("code", record.signal.code)
      object.field("code_name", record.signal.codeName)
      object.field("fault_address", hex(record.signal.faultAddress))
      if let pid = record.signal.senderPID {
        object.object("sender") { sender in
          sender.field("pid", pid)
          sender.field("uid", record.signal.senderUID ?? 0)
        }
      }
      object.field("thread_id", record.threadID)
      object.field("thread_name", record.threadName)
      object.field("threads_crashed", record.threadsCrashed)
      if let nested = record.nestedSignal {
        object.object("nested") { fields in
          fields.field("signal", nested)
          fields.field("code", record.nestedSignalCode ?? 0)
          fields.field("address", hex(record.nestedFaultAddress ?? 0))
        }
      }
      object.field("crash_wall_ns", record.crashWallNanoseconds)
      object.field("process_uptime_ns", record.processUptimeNanoseconds)
      object.field("free_memory_bytes", record.freeMemoryBytes)
      object.field("total_memory_bytes", record.totalMemoryBytes)
      object.field("handler_duration_ns", record.handlerDurationNanoseconds)
      object.field("flags", record.flags)
      object.field("architecture", record.architecture)
      unwound(
        &object, registers: record.registers, frames: record.frames, frameMarks: nil,
        stop: record.backtraceStop, stack: (record.stackLow, record.stackHigh, record.stackSource))
      if let table = record.threads {
        object.object("threads") { fields in
          fields.field("seen", table.seen)
          fields.field("captured", table.captured)
          fields.field("no_answer", table.noAnswer)
          fields.field("capture_signal", table.captureSignal)
          fields.field("capture_ns", table.captureNanoseconds)
          fields.field("deadline_ns", table.deadlineNanoseconds)
          fields.field("flags", table.flags)
          fields.field("threads_ended", table.threadsEnded)
          fields.field("threads_kept_for_dump", table.threadsKeptForDump)
          fields.field("threads_kept_for_chain", table.threadsKeptForChain)
          fields.array("threads") { threads in
            for thread in table.threads {
              threads.object { entry in
                entry.field("id", thread.id)
                entry.field("name", thread.name)
                entry.field("state", thread.state.rawValue)
                if let signal = thread.signal { entry.field("signal", signal) }
                unwound(
                  &entry, registers: thread.registers, frames: thread.frames, frameMarks: thread.frameMarks,
                  stop: thread.backtraceStop, stack: (thread.stackLow, thread.stackHigh, thread.stackSource))
              }
            }
          }
        }
      }
      object.array("modules") { modules in
        for module in record.modules {
          modules.object { fields in
            fields.field("path", module.path)
            fields.field("load_bias", hex(module.loadBias))
            fields.field("start", hex(module.start))
            fields.field("end", hex(module.end))
            fields.field("build_id", module.buildIDHex)
          }
        }
      }
    }
    return String(decoding: json.bytes, as: UTF8.self)
  }

  /// What one thread's unwinding found, the crashing thread's and every other's alike:
  /// registers, frames (and how each was found, when known), why the walk stopped, the stack.
  private static func unwound(
    _ object: inout JSONObject, registers: [CrashRecord.Register], frames: [UInt64], frameMarks: [UInt8]?,
    stop: CrashRecord.BacktraceStop, stack: (low: UInt64, high: UInt64, source: CrashRecord.StackSource)
  ) {
    object.object("registers") { fields in
      for register in registers { fields.field(register.name, hex(register.value)) }
    }
    object.array("frames") { values in
      for frame in frames { values.append(hex(frame)) }
    }
    if let frameMarks {
      object.array("frame_marks") { marks in
        for mark in frameMarks { marks.append(Int(mark)) }
      }
    }
    object.field("backtrace_stop", stop.rawValue)
    object.object("stack") { fields in
      fields.field("low", hex(stack.low))
      fields.field("high", hex(stack.high))
      fields.field("source", stack.source.rawValue)
    }
  }
}

extension String {
  fileprivate func padding(_ width: Int) -> String {
    count >= width ? self : self + String(repeating: " ", count: width - count)
  }
}
