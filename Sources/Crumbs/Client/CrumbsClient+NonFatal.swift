// CrumbsClient+NonFatal.swift — reports of errors the app caught: the current stack, the
// breadcrumbs so far and the session's attributes, stored and delivered like a crash report.
// Made inside an operation (CrumbsOperation.current, or the one CrumbsTracer keeps in the task's
// ServiceContext), a report carries that operation's trace, user and attributes over the
// session's: a server's many requests each report as their own.

extension CrumbsClient {
  /// Reports an `Error` the app survived, with the current thread's stack, the global and given
  /// attributes, attachments, and a snapshot of the breadcrumb trail. Returns the stored report.
  @discardableResult
  public func send(
    error: any Error, attributes: [String: String] = [:], attachments: [String] = []
  ) -> StoredReport? {
    let type = String(reflecting: Swift.type(of: error))
    return sendNonFatal(
      type: type, message: String(describing: error), attributes: attributes, attachments: attachments)
  }

  /// Reports a message (e.g. an unexpected state), like `send(error:)`.
  @discardableResult
  public func send(message: String, attributes: [String: String] = [:], attachments: [String] = [])
    -> StoredReport?
  {
    sendNonFatal(type: "Message", message: message, attributes: attributes, attachments: attachments)
  }

  /// Reports an exception-like value: a name and a reason, like `send(error:)`.
  @discardableResult
  public func send(
    exceptionName: String, reason: String, attributes: [String: String] = [:], attachments: [String] = []
  ) -> StoredReport? {
    sendNonFatal(type: exceptionName, message: reason, attributes: attributes, attachments: attachments)
  }

  func sendNonFatal(
    type: String, message: String, attributes extra: [String: String], attachments extraFiles: [String]
  ) -> StoredReport? {
    guard isEnabled, keepsNonFatalReport() else { return nil }
    let addresses = CurrentThread.returnAddresses(limit: 128)
    let (builder, files) = liveReportBuilder(
      attributes: operationScope().merging(extra) { _, given in given })
    let (report, attached) = builder.build(
      type: type, message: message, addresses: addresses, attachmentPaths: files + extraFiles)
    return storeLiveReport(report, attachments: attached)
  }

  /// The operation the caller runs in: the task's `CrumbsOperation.current`, else the one the
  /// installed lookup finds (CrumbsTracer: the task's `ServiceContext`).
  package func currentOperation() -> CrumbsOperation? {
    if let current = CrumbsOperation.current { return current }
    return state.withLock { $0.operationLookup }?()
  }

  /// Installs how `currentOperation` finds an operation outside `withOperation` (the last one
  /// installed is used).
  package func setOperationLookup(_ lookup: @escaping @Sendable () -> CrumbsOperation?) {
    state.withLock { $0.operationLookup = lookup }
  }

  /// The current operation's scope as report attributes: its trace (the reserved attributes),
  /// and the attributes its ledger entry holds (its user as `enduser.id`; a key held twice
  /// gives its last value). Empty outside an operation.
  func operationScope() -> [String: String] {
    guard let operation = currentOperation() else { return [:] }
    var scope: [String: String] = [:]
    for attribute in operation.contents?.attributes ?? [] { scope[attribute.key] = attribute.value }
    for (key, value) in operation.trace?.attributes ?? [] { scope[key] = value }
    return scope
  }

  /// Whether a non-fatal report made now is kept (`nonFatalSampleRate`); hangs do not ask.
  func keepsNonFatalReport() -> Bool {
    let rate = configuration.nonFatalSampleRate
    guard !rate.isNaN, rate < 1 else { return true }
    guard rate > 0 else { return false }
    return configuration.nonFatalSampleRandom() < rate
  }

  /// A builder of reports of this live process (non-fatal, hang): the session's attributes with
  /// `extra` over them, its resource, the app's name and version; and the session's attachments.
  func liveReportBuilder(attributes extra: [String: String]) -> (NonFatalReportBuilder, [String]) {
    let (sessionAttributes, globalFiles, recorded) = session.withLock {
      ($0.metadata.attributes, $0.metadata.attachments, $0.metadata.resource)
    }
    // A launch after a crash loop (two crashes or more) says so in every report it makes.
    var globalAttributes = sessionAttributes
    if let crashLoop, crashLoop.count >= CrashLoop.reportedFrom {
      globalAttributes[CrashLoopStep.attributeKey] = .string(String(crashLoop.count))
    }
    var builder = NonFatalReportBuilder(
      ring: ring, attributes: globalAttributes.merging(.init(strings: extra)) { _, new in new },
      appName: configuration.appName ?? "", appVersion: configuration.appVersion,
      attachmentSizeLimit: configuration.attachmentSizeLimit, symbolicator: liveSymbolicator)
    builder.sessionResource = recorded ?? measuredResource()
    builder.omitsHostName = !configuration.reportsHostName
    builder.redaction = configuration.redaction
    return (builder, globalFiles)
  }

  /// Stores a report of this live process, unless the delegate says no, and wakes delivery
  /// (which honours `heldUntilUnixNano`). Nil when refused or not stored (then `problems` says).
  func storeLiveReport(
    _ report: CrashReport, attachments: [(name: String, bytes: [UInt8])], heldUntilUnixNano: UInt64? = nil
  ) -> StoredReport? {
    let delegate = state.withLock { $0.delegate }
    if let delegate, !delegate.shouldProcess(report) { return nil }
    do {
      let stored = try store.store(report, attachments: attachments, heldUntilUnixNano: heldUntilUnixNano)
      tell(.reportStored(report.kind))
      uploader?.wake()
      return stored
    } catch {
      state.withLock { $0.problems.append("cannot store a \(report.kind.rawValue) report: \(error)") }
      return nil
    }
  }
}
