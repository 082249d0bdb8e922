// ReportDecodeCommand.swift — `crumbs report decode FILE`: a report.json pretty-printed, or an
// LZ4 attachment decompressed. What is wrong with a file that is neither is said in words (which
// field is missing or of the wrong type, and where), never as Swift's DecodingError dump.

import ArgumentParser
import Crumbs
import CrumbsPlatform
import Foundation

struct ReportDecodeCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "decode",
    abstract: "Print a report.json pretty-printed, or an .lz4 attachment decompressed.")

  @Argument(help: "A report.json, or an LZ4 attachment such as breadcrumbs.jsonl.lz4.")
  var file: String

  func run() throws {
    let bytes: [UInt8]
    do {
      bytes = try Syscall.readFile(absolute(file), limit: 256 << 20)
    } catch {
      throw fail("report decode", "cannot read \(file): \(error)")
    }
    if bytes.starts(with: [0x04, 0x22, 0x4D, 0x18]) {
      do {
        FileHandle.standardOutput.write(Data(try LZ4Frame.decompress(bytes)))
      } catch {
        throw fail("report decode", "\(file) is a damaged LZ4 frame: \(error)")
      }
      return
    }
    let object: Any
    do {
      object = try JSONSerialization.jsonObject(with: Data(bytes))
    } catch {
      throw fail("report decode", "\(file) is neither an LZ4 frame nor JSON")
    }
    do {
      _ = try ReportStore.decode(bytes)
    } catch {
      throw fail("report decode", "\(file) is JSON but not a Crumbs report: \(ReportProblem.words(error))")
    }
    let pretty = try JSONSerialization.data(
      withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    print(String(decoding: pretty, as: UTF8.self))
  }
}

/// Why a JSON document is not a report, in words.
enum ReportProblem {
  static func words(_ error: any Error) -> String {
    guard let error = error as? DecodingError else { return "\(error)" }
    switch error {
    case .keyNotFound(let key, let context):
      return "the field \(place(context.codingPath + [key])) is missing"
    case .valueNotFound(let type, let context):
      return "the field \(place(context.codingPath)) is null, where \(kind(type)) belongs"
    case .typeMismatch(let type, let context):
      return "the field \(place(context.codingPath)) is not \(kind(type))"
    case .dataCorrupted(let context):
      let reason = context.debugDescription.trimmed(of: ". ")
      return context.codingPath.isEmpty
        ? "it is damaged (\(reason))" : "the field \(place(context.codingPath)) is wrong: \(reason)"
    @unknown default:
      return "it does not have a report's fields"
    }
  }

  /// `frames[2].address`, quoted.
  static func place(_ path: [any CodingKey]) -> String {
    var text = ""
    for key in path {
      if let index = key.intValue {
        text += "[\(index)]"
      } else {
        text += (text.isEmpty ? "" : ".") + key.stringValue
      }
    }
    return "'" + (text.isEmpty ? "(top)" : text) + "'"
  }

  static func kind(_ type: Any.Type) -> String {
    switch type {
    case is String.Type: "a string"
    case is Bool.Type: "true or false"
    case is Int.Type, is Int32.Type, is Int64.Type, is UInt32.Type, is UInt64.Type: "a whole number"
    case is Double.Type: "a number"
    case is [Any].Type: "an array"
    case is [String: Any].Type: "an object"
    default:
      String(describing: type).hasPrefix("Array") ? "an array" : "an object"
    }
  }
}
