// NonFatalReportBuilder.swift — reports of the live process: an error the app survived, or a
// hang its watchdog saw (every thread), become reports like a crash's: the stack (symbolicated
// against the live process's modules), attributes, attachments within the size limit, and a
// snapshot of the breadcrumb trail, redacted (Redaction.swift). Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Symbolicates the live process's addresses, keeping its Symbolicator (and the names it
/// demangled) between reports while the module list is unchanged; after a dlopen a new one
/// reuses the symbol tables already parsed (ParsedModuleCache). Thread-safe.
package final class LiveSymbolicator: Sendable {
  private struct Cache {
    var modules: [LoadedModule] = []
    var symbolicator: Symbolicator?
  }
  private let cache = Mutex(Cache())
  package let options: Symbolicator.Options

  package init(options: Symbolicator.Options) { self.options = options }

  package func symbolicate(_ addresses: [UInt64]) -> (frames: [SymbolicatedFrame], modules: [LoadedModule]) {
    let current = CurrentProcessModules.list()
    // Every address is a return address (the capture starts at its caller's call site).
    return (with(modules: current) { $0.symbolicate(addresses, firstIsExactPC: false) }, current)
  }

  /// Runs `body` with the symbolicator for `modules` (this process's, as listed now or when a
  /// ThreadSnapshot was taken): the cached one when the list is unchanged.
  package func with<T: Sendable>(modules: [LoadedModule], _ body: (Symbolicator) -> T) -> T {
    cache.withLock { cache in
      if cache.symbolicator == nil || modules != cache.modules {
        cache.modules = modules
        cache.symbolicator = Symbolicator(modules: modules, options: options)
      }
      return body(cache.symbolicator!)
    }
  }
}

package struct NonFatalReportBuilder {
  package var ring: BreadcrumbRing
  package var attributes: [String: AttributeValue]
  package var appName: String
  package var appVersion: String?
  package var attachmentSizeLimit: Int
  package var symbolicator: LiveSymbolicator
  /// The session's resource as recorded so far (SessionMetadata.resource); nil: the machine's
  /// facts are read now (which is when a non-fatal report happens).
  package var sessionResource: [String: String]?
  /// Leaves `host.name` out of the report (`CrumbsConfiguration.reportsHostName` false).
  package var omitsHostName = false
  /// What is scrubbed from the trail and the report (`CrumbsConfiguration.redaction`).
  package var redaction = Redaction()

  package init(
    ring: BreadcrumbRing, attributes: [String: AttributeValue], appName: String, appVersion: String?,
    attachmentSizeLimit: Int, symbolicator: LiveSymbolicator
  ) {
    self.ring = ring
    self.attributes = attributes
    self.appName = appName
    self.appVersion = appVersion
    self.attachmentSizeLimit = attachmentSizeLimit
    self.symbolicator = symbolicator
  }

  /// The report of an error the calling thread survived, and the files to store with it: the
  /// calling thread's `addresses`, symbolicated here.
  package func build(type: String, message: String, addresses: [UInt64], attachmentPaths: [String])
    -> (CrashReport, [(name: String, bytes: [UInt8])])
  {
    let (symbolicated, modules) = symbolicator.symbolicate(addresses)
    return build(
      kind: .nonFatal, type: type, message: message, frames: CrashReportBuilder.frames(symbolicated),
      modules: modules, thread: (Int(CurrentThread.id), Self.currentThreadName()),
      attachmentPaths: attachmentPaths)
  }

  /// A report of the live process (`kind` `.nonFatal` or `.hang`): `frames` are the stack the
  /// report leads with (the exception's), of `thread`; `threads`, when given, every thread.
  package func build(
    kind: CrashReport.Kind, type: String, message: String, frames: [CrashReport.Frame],
    modules: [LoadedModule], thread: (id: Int, name: String?), threads: [CrashReport.Thread]? = nil,
    attachmentPaths: [String]
  ) -> (CrashReport, [(name: String, bytes: [UInt8])]) {
    // Redacted before the trail is encoded and the report built (Redaction.swift).
    let redactor = redaction.redactor()
    let contents = redactor.contents(ring.snapshot())
    var files: [(name: String, bytes: [UInt8])] = []
    var trailSize: Int?
    if let trail = try? TrailAttachment.make(contents.slots) {
      files.append(trail)
      trailSize = trail.bytes.count
    }
    let now = SystemClock.wallNanoseconds()
    var report = CrashReport(
      id: SessionID().description, kind: kind, exceptionType: type, exceptionMessage: message,
      exceptionStacktrace: CrashReport.stacktrace(frames), threadID: thread.id,
      threadName: thread.name, sessionID: ring.sessionID.description, reportingSessionID: nil,
      timeUnixNano: now, time: ISO8601.string(nanoseconds: now), observedTimeUnixNano: now,
      observedTime: ISO8601.string(nanoseconds: now), signal: nil, registers: [], frames: frames,
      modules: modules,
      resource: ProcessAttributes.resource(
        pid: getpid(), executable: SystemFacts.executablePath, appName: appName, appVersion: appVersion
      )
      .merging(sessionResource ?? ProcessAttributes.machine()) { _, session in session },
      attributes: attributes.filter { !TraceContext.isReserved($0.key) },
      breadcrumbs: TrailAttachment.summary(contents, attachmentSize: trailSize),
      attachments: [], damage: [], evidence: [], handlerDurationNanoseconds: nil)
    report.threads = threads
    // The span current when it was made, given as the reserved attributes (CrumbsTracing).
    report.trace = TraceContext(attributes: attributes.strings)
    if omitsHostName { report.resource[ProcessAttributes.hostNameKey] = nil }
    redactor.report(&report)
    report.damage += redactor.problems
    if let trailSize {
      report.attachments.append(
        .init(name: TrailAttachment.name, contentType: TrailAttachment.contentType, size: trailSize))
    }
    let attached = ReportAttachments.read(
      attachmentPaths, limit: attachmentSizeLimit, taken: files.map(\.name))
    report.attachments += attached.entries
    files += attached.files
    return (report, files)
  }

  package static func currentThreadName() -> String? {
    guard let bytes = try? Syscall.readFile("/proc/thread-self/comm", limit: 64) else { return nil }
    let name = String(decoding: bytes.filter { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
    return name.isEmpty ? nil : name
  }
}
