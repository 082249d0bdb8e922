// BacktraceSymbolUpload.swift — debug files to Backtrace's symbol store, so the server can name
// the frames of reports from stripped builds (BacktraceJSON sends each module's
// debug_identifier; the store matches the files it was given by the same build ID).
//
// One request per file: `POST {endpoint}/post?format=symbols&token=TOKEN&upload_file=NAME`
// (`&tag=TAG` when given), the file as the body (application/octet-stream). NAME is the file's
// name without a `.debug` suffix: the name of the module it describes, which the store files it
// under.
//
// Retries follow the report uploader's classes (ReportUploader.swift): a 2xx is uploaded (unless
// it came before the file was sent); 429 and 503 wait for Retry-After (capped at
// `maxRetryInterval`), 408, other 5xx and no answer wait `retryInterval`·2^(n-1) (capped), each
// while attempts < `retryLimit`; any other answer (401/403: a wrong token, 413: too large) fails
// the file at once. Files over `maxFileBytes` are not sent. The token never appears in a result:
// every reason passes through the request's Redactor.
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
    while true {
      result.attempts += 1
      let delay: Double
      switch transport.send(request) {
      case .success(let answer):
        result.status = answer.status
        if (200..<300).contains(answer.status), answer.requestSent {
          result.failure = nil
          return result
        }
        let reason = "HTTP \(answer.status)" + ReportUploader.excerpt(answer.body)
        result.failure = request.redactor.redact(reason)
        switch answer.status {
        case 200..<300:
          result.failure = "answered \(answer.status) before the file was sent"
          delay = backoff(afterAttempt: result.attempts)
        case 429, 503:
          let now = SystemClock.wallNanoseconds()
          let asked = ReportUploader.retryAfter(
            answer.headers["retry-after"], now: now, default: backoff(afterAttempt: result.attempts))
          delay = min(Double(asked) / 1e9, maxRetryInterval)
        case 408, 500..<600:
          delay = backoff(afterAttempt: result.attempts)
        default:
          return result
        }
      case .failure(let error):
        result.status = nil
        result.failure = "\(error)"
        guard error != .invalidURL else { return result }
        delay = backoff(afterAttempt: result.attempts)
      }
      guard result.attempts < retryLimit else {
        result.failure = (result.failure ?? "") + " (gave up after \(result.attempts) attempts)"
        return result
      }
      wait(delay)
    }
  }

  /// retryInterval·2^(n-1), capped at maxRetryInterval.
  func backoff(afterAttempt attempt: Int) -> Double {
    min(maxRetryInterval, retryInterval * Double(1 << min(max(attempt - 1, 0), 30)))
  }
}
