// LZ4Frame.swift — the LZ4 frame format through Debian's liblz4 (never vendored), so that
// `lz4 -d` reads what Crumbs writes. Not signal-safe.

import CLZ4

/// Why LZ4 failed.
public struct LZ4Error: Error, CustomStringConvertible, Equatable {
  public var reason: String
  public var description: String { "lz4: \(reason)" }
}

public enum LZ4Frame {
  /// Compresses `bytes` into one LZ4 frame: content size, and a checksum after each block.
  ///
  /// Block checksums, not the frame's content checksum: what goes wrong with a stored trail is
  /// its bytes on disk, the compressed ones, and a block's checksum covers exactly those (a
  /// damaged block is named before it is decompressed). The content checksum hashes the whole
  /// uncompressed trail (a megabyte of JSON for a full ring) at every store: 0.19 ms of the
  /// 0.56 ms LZ4 took per report (ReportFigures); the block checksums hash about a sixth of
  /// that. Frames written with a content checksum (by earlier versions, or by `lz4`) still
  /// verify it: liblz4 checks whatever the frame descriptor announces.
  public static func compress(_ bytes: [UInt8]) throws(LZ4Error) -> [UInt8] {
    var preferences = LZ4F_preferences_t()
    preferences.frameInfo.contentSize = UInt64(bytes.count)
    preferences.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled
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
    var output: [UInt8] = []
    try decode(bytes, limit: limit) { output.append(contentsOf: $0) }
    return output
  }

  /// Checks that `bytes` are whole, undamaged LZ4 frames, keeping none of the output: the magic
  /// number, the frame descriptor and its checksum, every block's size (and checksum, when the
  /// frame has them), the content size and content checksum when present, and that the output
  /// stays within `limit`. liblz4 makes each check as it decodes; this only discards the result.
  public static func verify(_ bytes: [UInt8], limit: Int = 1 << 30) throws(LZ4Error) {
    try decode(bytes, limit: limit) { _ in }
  }

  /// Decodes frame after frame, handing each piece of output to `sink`.
  private static func decode(
    _ bytes: [UInt8], limit: Int, into sink: (UnsafeBufferPointer<UInt8>) -> Void
  ) throws(LZ4Error) {
    var context: OpaquePointer?
    let created = LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))
    guard LZ4F_isError(created) == 0, let context else {
      throw LZ4Error(reason: "cannot create a decompression context")
    }
    defer { LZ4F_freeDecompressionContext(context) }
    var total = 0
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
        throw LZ4Error(reason: Self.reason(String(cString: LZ4F_getErrorName(hint))))
      }
      offset += sourceSize
      total += destinationSize
      guard total <= limit else { throw LZ4Error(reason: "output larger than \(limit) bytes") }
      chunk.withUnsafeBufferPointer { sink(UnsafeBufferPointer(rebasing: $0[0..<destinationSize])) }
      // hint 0: a frame ended. Another may follow.
      if hint == 0 && offset == bytes.count { break }
      if sourceSize == 0 && destinationSize == 0 { throw LZ4Error(reason: "truncated frame") }
    }
  }

  /// What liblz4's error name means for a frame read back from disk.
  static func reason(_ errorName: String) -> String {
    switch errorName {
    case "ERROR_frameType_unknown": "not an LZ4 frame (bad magic number)"
    case "ERROR_headerChecksum_invalid": "frame descriptor checksum mismatch"
    case "ERROR_headerVersion_wrong", "ERROR_reservedFlag_set", "ERROR_blockMode_invalid",
      "ERROR_contentChecksumFlag_invalid":
      "bad frame descriptor"
    case "ERROR_maxBlockSize_invalid": "bad block size"
    case "ERROR_decompressionFailed": "a block does not decompress"
    case "ERROR_blockChecksum_invalid": "block checksum mismatch"
    case "ERROR_contentChecksum_invalid": "content checksum mismatch"
    case "ERROR_frameSize_wrong": "content size mismatch"
    default: errorName
    }
  }
}
