// CrashReportBuilder+Frames.swift — a record's symbolicated addresses become the report's
// frames and threads, the one conversion crash reports and live captures (ThreadSnapshot) share.
//
// Entry points, in call order:
//   CrashReportBuilder.threads(_:crashing:frames:others:)   every thread of the record's table,
//                                                           the crashing one first
//     → thread(_:frames:)                                  one other thread, its state and frames
//   CrashReportBuilder.frames(_:marks:)                     a backtrace's report frames, numbered
//     → frameGroups(_:marks:)                              per address: its inlined calls, then
//                                                          the function it lies in
//     → frame(_:readable:full:)                            one frame, named both ways
//
// Not signal-safe; never traps (the reader validated the record).

import CrumbsRecorder

extension CrashReportBuilder {
  /// The report's threads: the crashing one first (marked, with the report's frames), then the
  /// others with their own frames (`others`, in the table's order, crashing thread left out).
  package static func threads(
    _ table: CrashRecord.ThreadTable, crashing record: CrashRecord, frames: [CrashReport.Frame],
    others: [[SymbolicatedFrame]]
  ) -> [CrashReport.Thread] {
    var named = others.makeIterator()
    var result: [CrashReport.Thread] = []
    for thread in table.threads {
      if thread.state == .crashing {
        result.append(
          CrashReport.Thread(
            id: Int(thread.id), name: thread.name.isEmpty ? nil : thread.name, state: .crashed, crashed: true,
            signal: record.signal.name.isEmpty ? nil : record.signal.name, frames: frames))
        continue
      }
      result.append(Self.thread(thread, frames: named.next() ?? []))
    }
    // The crashing thread stays first whatever the table's order.
    if let index = result.firstIndex(where: \.crashed), index != 0 {
      result.insert(result.remove(at: index), at: 0)
    }
    return result
  }

  /// A thread other than the crashing one, with its frames named (`symbolicated`, in its own
  /// order) and marked how the capture found each: the one conversion crash reports and live
  /// captures (ThreadSnapshot) share.
  package static func thread(_ thread: CrashRecord.Thread, frames symbolicated: [SymbolicatedFrame])
    -> CrashReport.Thread
  {
    let state: CrashReport.Thread.State =
      switch thread.state {
      case .captured: .captured
      case .noAnswer: .noAnswer
      case .notAsked: .notAsked
      case .alsoCrashed: .alsoCrashed
      case .requesting: .requesting
      case .crashing, .unknown: .unknown
      }
    return CrashReport.Thread(
      id: Int(thread.id), name: thread.name.isEmpty ? nil : thread.name, state: state, crashed: false,
      signal: thread.signal.map { SignalNames.name($0) },
      registers: thread.registers.isEmpty
        ? nil : thread.registers.map { .init(name: $0.name, value: hex16($0.value)) },
      frames: Self.frames(symbolicated, marks: thread.frameMarks.map(FrameMarks.init(rawValue:))),
      notSignalled: thread.notSignalled.map(\.names),
      blockedSystemCall: thread.blockedSystemCall.map(Int.init), wait: thread.wait)
  }

  /// The report's frames: each named as a person reads it (`function`) and in full (`symbol`),
  /// each distinct symbol demangled once (a deep recursion repeats one name 128 times); each
  /// address's inlined calls first, as frames of their own (`inlined`), numbered in that order;
  /// each with how the crash handler found its address (`marks[i]` for address i, when given).
  package static func frames(_ symbolicated: [SymbolicatedFrame], marks: [FrameMarks] = []) -> [CrashReport
    .Frame]
  {
    numbered(frameGroups(symbolicated, marks: marks).flatMap { $0 })
  }

  /// The indices of async resume points among `marks`.
  static func asyncIndices(_ marks: [FrameMarks]) -> Set<Int> {
    Set(marks.indices.filter { marks[$0].contains(.async) })
  }

  /// Per address, its report frames (`frames(_:marks:)`, not numbered yet): its inlined calls,
  /// innermost first, then the frame of the function the address lies in.
  package static func frameGroups(_ symbolicated: [SymbolicatedFrame], marks: [FrameMarks] = [])
    -> [[CrashReport.Frame]]
  {
    var names: [String: (readable: String?, full: String?)] = [:]
    return symbolicated.enumerated().map { position, address in
      let origin = position < marks.count ? CrashReport.FrameOrigin(marks[position]) : nil
      return address.expanded.map { frame in
        var named: CrashReport.Frame
        if let symbol = frame.symbol {
          let known =
            names[symbol]
            ?? (SymbolDemangler.readable(symbol), SymbolDemangler.demangle(symbol, style: .full) ?? symbol)
          names[symbol] = known
          named = Self.frame(frame, readable: known.readable ?? frame.function ?? symbol, full: known.full)
        } else {
          named = Self.frame(frame, readable: frame.function, full: nil)
        }
        named.foundBy = origin
        return named
      }
    }
  }

  /// `frames` with each `index` its position.
  package static func numbered(_ frames: [CrashReport.Frame]) -> [CrashReport.Frame] {
    frames.enumerated().map { position, frame in
      var frame = frame
      frame.index = position
      return frame
    }
  }

  package static func frame(_ frame: SymbolicatedFrame, readable: String?, full: String?) -> CrashReport.Frame
  {
    CrashReport.Frame(
      index: frame.index, address: CrashReport.hex(frame.address), module: frame.modulePath,
      moduleOffset: frame.moduleOffset.map(CrashReport.hex), buildID: frame.buildID,
      function: readable, symbol: full, symbolOffset: frame.symbolOffset, file: frame.file,
      line: frame.line, column: frame.column, note: frame.note, inlined: frame.inlined ? true : nil)
  }
}
