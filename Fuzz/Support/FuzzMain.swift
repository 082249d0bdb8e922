// FuzzMain.swift — what every fuzz executable does besides its own parser: the command line
// (`--make-seeds DIR [FILES…]`, libFuzzer in a `-sanitize=fuzzer` build, otherwise replaying the
// files given, one line each) and small file helpers. One copy, shared by every target.

import CFuzzDriver

#if canImport(Glibc)
  import Glibc
#endif

public enum FuzzMain {
  /// Runs the executable `name`. `callback` is the target's libFuzzer entry (a C function: pass
  /// a closure that only calls a global function); `makeSeeds(directory, extraFiles)` writes the
  /// seed corpus and returns how many; `describe(bytes)` says in one line what the parser made
  /// of a replayed file.
  public static func run(
    name: String, callback: crumbs_fuzz_callback,
    makeSeeds: (String, [String]) throws -> Int, describe: ([UInt8]) -> String
  ) -> Never {
    let arguments = CommandLine.arguments
    if arguments.count >= 3, arguments[1] == "--make-seeds" {
      do {
        let count = try makeSeeds(arguments[2], Array(arguments.dropFirst(3)))
        print("wrote \(count) seeds to \(arguments[2])")
        exit(0)
      } catch {
        printError("\(name): \(error)")
        exit(1)
      }
    }
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    let status = crumbs_fuzz_run(&argc, &argv, callback)
    if status != -1 { exit(status) }

    // A normal build: replay the files given, one line each.
    let files = Array(arguments.dropFirst())
    if files.isEmpty {
      print("not a fuzzer build (build with -sanitize=fuzzer; see Fuzz/README.md); pass files to replay them")
      exit(0)
    }
    for path in files {
      do {
        let bytes = try readFile(path)
        _ = bytes.withUnsafeBufferPointer { callback($0.baseAddress, $0.count) }
        print("\(path): \(describe(bytes))")
      } catch {
        printError("\(name): \(error)")
        exit(1)
      }
    }
    exit(0)
  }

  public static func readFile(_ path: String) throws -> [UInt8] {
    guard let file = fopen(path, "rb") else { throw FuzzToolError(message: "cannot open \(path)") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = fread(&chunk, 1, chunk.count, file)
      if count <= 0 { break }
      bytes += chunk[0..<count]
    }
    return bytes
  }

  public static func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    guard let file = fopen(path, "wb") else { throw FuzzToolError(message: "cannot create \(path)") }
    defer { fclose(file) }
    guard fwrite(bytes, 1, bytes.count, file) == bytes.count else {
      throw FuzzToolError(message: "cannot write \(path)")
    }
  }

  /// Writes text seeds (name, contents) into `directory`, creating it; returns how many.
  public static func writeSeeds(_ seeds: [(String, String)], in directory: String) throws -> Int {
    mkdir(directory, 0o755)  // EEXIST is fine; any other failure shows at the first write
    for (name, text) in seeds { try writeFile(directory + "/" + name, Array(text.utf8)) }
    return seeds.count
  }

  public static func printError(_ line: String) {
    let text = line + "\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
  }
}

/// A fuzz tool's own failure (a seed that cannot be written, a file that cannot be read).
public struct FuzzToolError: Error, CustomStringConvertible {
  public var message: String
  public init(message: String) { self.message = message }
  public var description: String { message }
}
