// LZ4Frame.swift — the LZ4 frame format through Debian's liblz4 (never vendored), so that
// `lz4 -d` reads what Crumbs writes. Not signal-safe.

import CLZ4

/// Why LZ4 failed.
public struct LZ4Error: Error, CustomStringConvertible, Equatable {
  public var reason: String
  public var description: String { "lz4: \(reason)" }
}

public enum LZ4Frame {
  /// Compresses `bytes` into one LZ4 frame (content size and content checksum included).
  public static func compress(_ bytes: [UInt8]) throws(LZ4Error) -> [UInt8] {
    var preferences = LZ4F_preferences_t()
    preferences.frameInfo.contentSize = UInt64(bytes.count)
    preferences.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled
    preferences.compressionLevel = 0  // the fast default: GB/s, plenty for crash-time sizes
    let bound = LZ4F_compressFrameBound(bytes.count, &preferences)
    var failure: Int = 0
    // Uninitialized capacity: zero-filling the bound first would cost as much as compressing.
    let output = [UInt8](unsafeUninitializedCapacity: bound) { destination, count in
      let written = bytes.withUnsafeBytes { source in
        LZ4F_compressFrame(
          destination.baseAddress, destination.count, source.baseAddress, source.count, &preferences)
      }
      if LZ4F_isError(written) != 0 {
        failure = written
        count = 0
      } else {
        count = written
      }
    }
    if failure != 0 {
      throw LZ4Error(reason: String(cString: LZ4F_getErrorName(failure)))
    }
    return output
  }

  /// Decompresses one or more concatenated LZ4 frames. `limit` bounds the output so a hostile
  /// frame cannot exhaust memory.
  public static func decompress(_ bytes: [UInt8], limit: Int = 1 << 30) throws(LZ4Error) -> [UInt8] {
    var context: OpaquePointer?
    let created = LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))
    guard LZ4F_isError(created) == 0, let context else {
      throw LZ4Error(reason: "cannot create a decompression context")
    }
    defer { LZ4F_freeDecompressionContext(context) }
    var output: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    var offset = 0
    guard !bytes.isEmpty else { throw LZ4Error(reason: "empty input") }
    while true {
      var sourceSize = bytes.count - offset
      var destinationSize = chunk.count
      let hint = chunk.withUnsafeMutableBytes { destination in
        bytes.withUnsafeBytes { source in
          LZ4F_decompress(
            context, destination.baseAddress, &destinationSize, source.baseAddress! + offset,
            &sourceSize, nil)
        }
      }
      if LZ4F_isError(hint) != 0 {
        throw LZ4Error(reason: String(cString: LZ4F_getErrorName(hint)))
      }
      offset += sourceSize
      output.append(contentsOf: chunk[0..<destinationSize])
      guard output.count <= limit else { throw LZ4Error(reason: "output larger than \(limit) bytes") }
      // hint 0: a frame ended. Another may follow.
      if hint == 0 && offset == bytes.count { break }
      if sourceSize == 0 && destinationSize == 0 { throw LZ4Error(reason: "truncated frame") }
    }
    return output
  }
}
