// PackageNote.swift — the package an executable says it belongs to: systemd's "Package Metadata
// for Executable Files", an ELF note in `.note.package` (owner "FDO", type 0xcafe1a7e) whose
// descriptor is one JSON object: `type`, `name`, `version`, `os`, `osVersion`, `debugInfoUrl`,
// and any extra keys a build adds (a `commit`). Linkers write it from `--package-metadata=JSON`
// (lld 15+, mold, gold and bfd 2.39+); `objcopy --add-section` adds it to any binary.
//
// Entry points, in call order:
//   ELFImage.parse                       reads the section (at most `maxNoteBytes`) and calls
//   PackageNote.parse(notes:alignment:)  the notes walked with every size checked, the FDO one's
//                                        JSON decoded (strings only; each value at most
//                                        `maxValueBytes`, at most `maxKeys` keys)
//   PackageNote.resourceAttributes(…)    what a report's resource takes from it
//
// Untrusted bytes: any input gives a note or a Failure with its reason, never a trap (the ELF
// fuzz target drives it through ELFImage.parse). Not signal-safe.

import CrumbsRecorder
import FoundationEssentials

/// An executable's package metadata (see the file comment).
public struct PackageNote: Sendable, Equatable {
  /// The section linkers put the note in.
  public static let sectionName = ".note.package"
  /// The note's owner and type, as systemd's specification fixes them.
  public static let owner = "FDO"
  public static let noteType: UInt32 = 0xcafe_1a7e
  /// The most bytes of notes read from the section.
  public static let maxNoteBytes = 64 << 10
  /// The longest value kept (longer ones are cut).
  public static let maxValueBytes = 1024
  /// The most keys kept.
  public static let maxKeys = 32

  /// Every string-valued key, as the JSON had it (cut to `maxValueBytes`).
  public var fields: [String: String]

  public var type: String? { fields["type"] }
  public var name: String? { fields["name"] }
  public var version: String? { fields["version"] }
  public var os: String? { fields["os"] }
  /// A debuginfod server for this package's debug files.
  public var debugInfoURL: String? { fields["debugInfoUrl"] }
  /// The source revision, when the build added one.
  public var commit: String? { fields["commit"] }

  /// Why a package note could not be read.
  public struct Failure: Error, Sendable, Equatable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
  }

  /// The FDO package note among `notes` (a note section's bytes, its `alignment`), decoded.
  public static func parse(notes bytes: [UInt8], alignment: UInt64) -> Result<PackageNote, Failure> {
    let align = alignment == 8 ? 8 : 4
    func u32(_ at: Int) -> Int {
      Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
    }
    var offset = 0
    while bytes.count - offset >= 12 {
      let nameSize = u32(offset)
      let descriptorSize = u32(offset + 4)
      let type = UInt32(u32(offset + 8))
      let nameStart = offset + 12
      guard nameSize <= bytes.count - nameStart else {
        return .failure(.init("a note's name runs past the section"))
      }
      let descriptorStart = (nameStart + nameSize + align - 1) / align * align
      guard descriptorStart <= bytes.count, descriptorSize <= bytes.count - descriptorStart else {
        return .failure(.init("a note's descriptor runs past the section"))
      }
      let name = bytes[nameStart..<nameStart + nameSize].prefix { $0 != 0 }
      if type == noteType, name.elementsEqual(owner.utf8) {
        let json = bytes[descriptorStart..<descriptorStart + descriptorSize].prefix { $0 != 0 }
        return decode(Array(json))
      }
      offset = (descriptorStart + descriptorSize + align - 1) / align * align
    }
    return .failure(.init("no \(owner) package note"))
  }

  /// The JSON object's string values (others skipped), bounded.
  static func decode(_ json: [UInt8]) -> Result<PackageNote, Failure> {
    guard let object = try? JSONDecoder().decode(StringFields.self, from: Data(json)) else {
      return .failure(.init("the package note is not a JSON object"))
    }
    guard !object.fields.isEmpty else { return .failure(.init("the package note names nothing")) }
    return .success(PackageNote(fields: object.fields))
  }

  /// What a report's resource takes from the note: `service.version` when the app set none,
  /// and the package's type, name, version and commit as `crumbs.package.*`.
  public func resourceAttributes(over resource: [String: String]) -> [String: String] {
    var result = resource
    if (result["service.version"] ?? "").isEmpty, let version, !version.isEmpty {
      result["service.version"] = version
    }
    for (key, value) in [("type", type), ("name", name), ("version", version), ("commit", commit)] {
      if let value, !value.isEmpty { result["crumbs.package." + key] = value }
    }
    return result
  }

  /// A JSON object read for its string values only, bounded.
  private struct StringFields: Decodable {
    var fields: [String: String] = [:]

    struct Key: CodingKey {
      var stringValue: String
      var intValue: Int? { nil }
      init(stringValue: String) { self.stringValue = stringValue }
      init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: Key.self)
      for key in container.allKeys.prefix(PackageNote.maxKeys) {
        guard let value = try? container.decode(String.self, forKey: key) else { continue }
        let name = String(decoding: key.stringValue.utf8.prefix(128), as: UTF8.self)
        fields[name] = String(decoding: value.utf8.prefix(PackageNote.maxValueBytes), as: UTF8.self)
      }
    }
  }
}

extension PackageNote {
  /// The package note of the executable at `path`, read now (its headers and notes only), when
  /// the file's build ID is the one `modules` recorded for that path: a binary replaced since
  /// (a deploy) says nothing about the process that ran. Nil otherwise, or without a note.
  package static func ofExecutable(_ path: String, modules: [LoadedModule]) -> PackageNote? {
    guard path.hasPrefix("/"), let module = modules.first(where: { $0.path == path }),
      !module.buildID.isEmpty,
      let image = try? ELFImage.read(path: path, symbols: false), image.buildID == module.buildID,
      case .success(let note)? = image.packageNote
    else { return nil }
    return note
  }
}

extension Symbolicator.Options {
  /// These options for a process whose executable carries `note`: with its `debugInfoUrl`
  /// asked too (`packageDebugInfo` makes the remote debug files that ask it, replacing
  /// `remoteDebugFiles`), and why not when the URL is refused. Unchanged without a note, a URL,
  /// or `packageDebugInfo`.
  package func askingPackageNote(_ note: PackageNote?) -> (Symbolicator.Options, refusal: String?) {
    guard let url = note?.debugInfoURL, let make = packageDebugInfo else { return (self, nil) }
    switch make(url) {
    case .success(let remote):
      var options = self
      options.remoteDebugFiles = remote
      return (options, nil)
    case .failure(let failure):
      return (self, failure.reason)
    }
  }
}
