// CLIConventions.swift — what every `crumbs` command does the same way: exit codes, colour,
// secrets, the environment, and opening a Crumbs directory without creating one.
//
// Exit codes (also in `crumbs --help` and docs/cli.md):
//   0   success
//   1   failure: the work was not done (a report stayed pending or was dropped, an upload was
//       refused, a file is unreadable or not what it should be, --dir is missing or is not a
//       Crumbs directory)
//   3   nothing found: no report has that id, no ELF file in the directories
//   64  usage error: a wrong option or argument, an ambiguous report id prefix (EX_USAGE, what
//       ArgumentParser exits with on a usage error)
//
// Colour (`--color auto|always|never`, default auto): auto colours only when stdout is a
// terminal and NO_COLOR is unset or empty (https://no-color.org); always and never win over
// NO_COLOR, being asked for on this command line.
//
// Secrets (a Backtrace token, header values) come from a file (`--token-file`, `--header-file`)
// or the environment (CRUMBS_BACKTRACE_TOKEN_FILE, CRUMBS_BACKTRACE_TOKEN, CRUMBS_SECRET_HEADERS):
// on a command line they show in `ps` and the shell's history.
//
// The environment: every command reads the CRUMBS_* and OTEL_* variables the way the client does
// (CrumbsEnvironment, read once: `CrumbsEnvironment.cli`), and a flag wins over a variable. The
// Crumbs directory is --dir, else CRUMBS_DIRECTORY, else a usage error saying how to name it
// (only `crumbs demo` has a folder of its own, crumbs-demo).
// Not signal-safe (an ordinary command-line program).

import ArgumentParser
import Crumbs
import CrumbsPlatform
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The exit codes every command uses (see the file comment).
enum CLIExit {
  static let failure = ExitCode(1)
  static let nothingFound = ExitCode(3)
  static let usage = ExitCode.validationFailure

  /// The text `crumbs --help` shows.
  static let help = """
    Exit codes: 0 success; 1 failure (the work was not done: a report stayed pending, an upload \
    was refused, a file is unreadable, --dir is missing or not a Crumbs directory); 3 nothing \
    found (no report has that id, no ELF file in the directories); 64 usage error (a wrong option \
    or argument, an ambiguous report id prefix).
    Colour: --color auto|always|never where a command colours its output; auto colours a \
    terminal unless NO_COLOR is set.
    Secrets: --token-file, --header-file or CRUMBS_BACKTRACE_TOKEN_FILE / CRUMBS_BACKTRACE_TOKEN / \
    CRUMBS_SECRET_HEADERS rather than the command line.
    Environment (a flag wins): CRUMBS_DIRECTORY (the default of --dir), CRUMBS_OTLP_ENDPOINT, \
    CRUMBS_BACKTRACE_URL and the OTEL_EXPORTER_OTLP_* variables (the destination of collect and \
    reports send, as the client takes them), CRUMBS_DISABLED (collect and reports send send nothing).
    """
}

/// Prints `crumbs <command>: message` on stderr and returns the error to throw.
func fail(_ command: String, _ message: String, _ code: ExitCode = CLIExit.failure) -> ExitCode {
  printError("crumbs \(command): \(message)")
  return code
}

/// Refuses a `--timeout` that is not a number of seconds the transport takes as it is (inf, NaN,
/// 0, negative, longer than a day): a usage error saying what is allowed, never a trap.
func validateTimeout(_ seconds: Double) throws {
  guard CurlTransport.usableTimeout(seconds) == seconds else {
    throw ValidationError(
      "--timeout is seconds: a number above 0 and at most \(Int(CurlTransport.maxTimeout)) (got \(seconds))")
  }
}

/// `--color auto|always|never`.
enum ColorChoice: String, ExpressibleByArgument, CaseIterable {
  case auto, always, never
}

struct ColorOptions: ParsableArguments {
  @Option(help: "Colour: auto (a terminal, unless NO_COLOR is set), always or never.")
  var color: ColorChoice = .auto

  /// Whether to colour what goes to stdout.
  var enabled: Bool {
    switch color {
    case .always: true
    case .never: false
    case .auto: isatty(1) != 0 && (Environment.value("NO_COLOR") ?? "").isEmpty
    }
  }

  var style: TerminalStyle { TerminalStyle(enabled: enabled) }
}

enum Environment {
  static func value(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
}

extension CrumbsEnvironment {
  /// This process's CRUMBS_* and OTEL_* variables, read once (the token file with them).
  static let cli = CrumbsEnvironment(CrumbsEnvironment.processEnvironment())

  /// The problems of the variables a delivering command uses (all but CRUMBS_DIRECTORY's, which
  /// has none), printed on stderr.
  func printProblems(command: String) {
    for problem in problemDescriptions { printError("crumbs \(command): \(problem)") }
  }
}

/// Secrets read from a file or the environment.
enum Secrets {
  /// The whole file, without the white space around it (CrumbsEnvironment.readSecret, as the
  /// client reads CRUMBS_BACKTRACE_TOKEN_FILE: a regular file, bounded); an error in words when
  /// it cannot be read or is empty. `singleLine`: a token, not header lines.
  static func file(_ path: String, command: String, what: String, singleLine: Bool = false) throws -> String {
    switch CrumbsEnvironment.readSecret(file: path, limit: 1 << 16, singleLine: singleLine) {
    case .success(let text): return text
    case .failure(let error): throw fail(command, "the \(what) file \(path) \(error)")
    }
  }

  /// `Name: value` lines (blank lines and `#` comments skipped), every value secret.
  static func headers(_ text: String, source: String, command: String) throws -> [HTTPHeader] {
    var headers: [HTTPHeader] = []
    for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
      let trimmed = line.trimmed(of: " \t\r")
      if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
      guard let header = HTTPHeader(parsing: trimmed, isSecret: true) else {
        throw fail(command, "\(source) line \(number + 1) is not 'Name: value'", CLIExit.usage)
      }
      headers.append(header)
    }
    return headers
  }
}

/// Where the Crumbs directory is, opened without creating anything.
struct StoreOptions: ParsableArguments {
  @Option(help: "The Crumbs directory (holding reports/); default: CRUMBS_DIRECTORY.")
  var dir: String?

  /// What a command says when nothing names the Crumbs directory.
  static let noDirectory =
    "which Crumbs directory? give --dir DIR, or set CRUMBS_DIRECTORY to the directory the app's client uses"

  /// --dir, else CRUMBS_DIRECTORY, else a usage error saying how to name it: never a default
  /// folder that is not the app's.
  func directory(command: String) throws -> String {
    if let dir { return dir }
    if let directory = CrumbsEnvironment.cli.directory { return directory }
    throw fail(command, Self.noDirectory, CLIExit.usage)
  }

  /// The directory as named, for messages (after `directory(command:)` found one).
  var named: String { dir ?? CrumbsEnvironment.cli.directory ?? "" }

  /// The report store in the directory, which must exist: a missing directory, or one that is
  /// not a Crumbs directory, is an error (exit 1), never an empty store made on the spot.
  /// `readOnly` opens it without making or moving any folder (list, show).
  func openStore(command: String, readOnly: Bool = false) throws -> ReportStore {
    let dir = try directory(command: command)
    let directory = absolute(dir)
    guard Syscall.fileExists(directory) else {
      let from = self.dir == nil ? "CRUMBS_DIRECTORY names it" : "give the Crumbs directory with --dir"
      throw fail(command, "no such directory: \(dir) (\(from))")
    }
    guard Syscall.isDirectory(directory) else { throw fail(command, "\(dir) is not a directory") }
    guard Syscall.isDirectory(CrumbsDirectory(directory).reports) else {
      throw fail(command, "\(dir) is not a Crumbs directory: it has no reports/ folder")
    }
    if readOnly { return ReportStore(existingDirectory: directory) }
    do {
      return try ReportStore(directory: directory)
    } catch {
      throw fail(command, "cannot open the report store in \(dir): \(error)")
    }
  }

  /// The stored report `id` names (a unique prefix will do), or the error in words: not found
  /// (exit 3), ambiguous (exit 64, with the candidates), unreadable (exit 1).
  func load(_ id: String, from store: ReportStore, command: String) throws -> StoredReport {
    do {
      return try store.load(id: id)
    } catch .notFound {
      throw fail(command, "no report \(id) in \(named)", CLIExit.nothingFound)
    } catch .ambiguous(_, let ids) {
      throw fail(
        command,
        "\(id) is the start of \(ids.count) report ids; give more of it:\n  "
          + ids.joined(separator: "\n  "), CLIExit.usage)
    } catch {
      throw fail(command, "\(error)")
    }
  }
}

/// Lets `options` fetch debug files and sources, for a command that names a stored report's
/// frames (symbolicate, reports show --symbolicate): a debuginfod client for the elfutils
/// variables when DEBUGINFOD_URLS is set, and the crashed executable's package note
/// `debugInfoUrl` asked after them (DebuginfodClient.packageNoteClients); cached in the
/// store's Crumbs directory unless DEBUGINFOD_CACHE_PATH names a folder.
func allowFetching(_ options: inout Symbolicator.Options, store: ReportStore) {
  let environment = CrumbsEnvironment.debuginfodEnvironment()
  let directory = Syscall.directoryName(of: store.path)
  options.remoteDebugFiles = DebuginfodSettings(environment: environment, crumbsDirectory: directory).map {
    DebuginfodClient(settings: $0)
  }
  options.packageDebugInfo = DebuginfodClient.packageNoteClients(
    environment: environment, crumbsDirectory: directory)
}
