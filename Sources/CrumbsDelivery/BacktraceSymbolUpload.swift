// BacktraceSymbolUpload.swift — debug files to Backtrace's symbol store, so the server can name
// the frames of reports from stripped builds (BacktraceJSON sends each module's
// debug_identifier; the store matches the files it was given by the same build ID).
//
// One request per file: `POST {endpoint}/post?format=symbols&token=TOKEN&upload_file=NAME`
// (`&tag=TAG` when given), the file as the body (application/octet-stream). NAME is the file's
// name without a `.debug` suffix: the name of the module it describes, which the store files it
// under.
//
// Retries follow delivery's one RetryPolicy (RetryPolicy.swift) on the general verdict
// (ReportDestination.generalVerdict): a 2xx is uploaded (unless it came before the file was
// sent); 429 waits for Retry-After (`retryInterval` without one) and counts as an attempt; 408,
// 5xx and no answer wait `retryInterval`·2^(n-1) (no jitter; never less than a 503's
// Retry-After), each while attempts < `retryLimit`; any other answer (401/403: a wrong token,
// 413: too large) and an invalid URL fail the file at once. No wait is longer than
// `maxRetryInterval`. Files over `maxFileBytes` are not sent. The token never appears in a
// result: every reason passes through the request's Redactor.
//
// Entry points: BacktraceSymbolUpload(endpoint:token:) → request(name:body:) →
// upload(path:transport:). Not signal-safe.

import CrumbsPlatform
import CrumbsRecorder
import CrumbsReports
import FoundationEssentials

#if canImport(Glibc)
  import Glibc
#endif

/// Uploads debug files to a Backtrace instance's symbol store.
public struct BacktraceSymbolUpload: Sendable {
  /// The instance, e.g. `https://UNIVERSE.sp.backtrace.io:6098`.
  public var endpoint: String
  /// A token with the symbol:post capability (redacted from every result).
  public var token: String
  /// Groups the uploads in the store (e.g. the release), when given.
  public var tag: String?
  public var headers: [HTTPHeader] = []
  /// Attempts per file.
  public var retryLimit = 3
  /// Seconds before the first retry; doubled after each further failure.
  public var retryInterval: Double = 5
  /// The longest wait between two attempts (a Retry-After included), in seconds.
  public var maxRetryInterval: Double = 120
  /// Files larger than this are not sent.
  public var maxFileBytes = 1 << 30

  public init(endpoint: String, token: String, tag: String? = nil) {
    self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
    self.token = token
    self.tag = tag
  }

  /// What became of one file.
  public struct Result: Sendable, Equatable {
    public var path: String
    /// The name it was uploaded as.
    public var name: String
    public var attempts: Int
    /// The last HTTP status, when the server answered.
    public var status: Int?
    /// Nil when uploaded; else why not (secrets redacted).
    public var failure: String?
    public var uploaded: Bool { failure == nil }
  }

  /// The name a debug file is uploaded as (see the file comment).
  public static func uploadName(for path: String) -> String {
    let name = Syscall.baseName(of: path)
    return name.hasSuffix(".debug") && name.count > 6 ? String(name.dropLast(6)) : name
  }

  /// The request carrying `body` as `name`.
  public func request(name: String, body: [UInt8]) -> DeliveryRequest {
    var url =
      endpoint + "/post?format=symbols&token=" + Redactor.percentEncoded(token) + "&upload_file="
      + Redactor.percentEncoded(name)
    if let tag { url += "&tag=" + Redactor.percentEncoded(tag) }
    return DeliveryRequest(
      destination: "backtrace-symbols", reportID: name, url: url,
      headers: [HTTPHeader("Content-Type", "application/octet-stream")] + headers, body: body,
      secrets: [token])
  }

  /// Sleeps `seconds` (the default `wait`).
  public static func sleep(_ seconds: Double) {
    guard seconds > 0 else { return }  // NaN included
    let clamped = min(seconds, 1e9)
    let whole = clamped.rounded(.down)
    var time = timespec(tv_sec: Int(whole), tv_nsec: Int((clamped - whole) * 1e9))
    var left = timespec()
    while nanosleep(&time, &left) != 0 && errno == EINTR { time = left }
  }

  /// Uploads the file at `path`, retrying as the file comment says; `wait` sleeps (seconds).
  public func upload(
    path: String, transport: any HTTPTransport,
    wait: (Double) -> Void = BacktraceSymbolUpload.sleep
  ) -> Result {
    let name = Self.uploadName(for: path)
    var result = Result(path: path, name: name, attempts: 0, status: nil, failure: nil)
    guard let size = Syscall.fileSize(atPath: path) else {
      result.failure = "cannot read \(path)"
      return result
    }
    guard size <= maxFileBytes else {
      result.failure = "\(size) bytes, over the \(maxFileBytes)-byte limit"
      return result
    }
    let body: [UInt8]
    do {
      body = try Syscall.readFile(path, limit: maxFileBytes)
    } catch {
      result.failure = "cannot read \(path): \(error)"
      return result
    }
    let request = request(name: name, body: body)
    let policy = retryPolicy
    while true {
      result.attempts += 1
      let answer: RetryPolicy.Answer
      switch transport.send(request) {
      case .success(let response):
        result.status = response.status
        answer = .answered(response, verdict: BacktraceDestination.generalVerdict(on: response))
      case .failure(let error):
        result.status = nil
        answer = .failed(error)
      }
      let now = SystemClock.wallNanoseconds()
      let until: UInt64
      switch policy.decision(
        on: answer, attempts: result.attempts, now: now, random: 0, redactor: request.redactor)
      {
      case .delivered:
        result.failure = nil
        return result
      case .throttled(let pause):
        // Counted here (see RetryPolicy.swift): a server that always answers 429 ends the loop.
        guard result.attempts < retryLimit else {
          result.failure =
            RetryPolicy.Decision.giveUp(lastFailure: "HTTP 429", attempts: result.attempts).reason
          return result
        }
        result.failure = "HTTP 429"
        until = pause
      case .retry(let reason, let next):
        result.failure = reason
        until = next
      case let decision:
        result.failure = decision.reason
        return result
      }
      wait(min(Double(until > now ? until - now : 0) / 1e9, maxRetryInterval))
    }
  }

  /// The retry policy these fields make: no jitter (one file at a time, in a CLI); a 429
  /// without Retry-After waits `retryInterval`.
  var retryPolicy: RetryPolicy {
    RetryPolicy(
      retryLimit: retryLimit, retryInterval: retryInterval, maxRetryInterval: maxRetryInterval, jitter: 0,
      defaultRetryAfter: retryInterval)
  }
}
