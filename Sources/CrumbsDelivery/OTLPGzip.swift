// OTLPGzip.swift — gzip (RFC 1952) for OTLP/HTTP request bodies (`Content-Encoding: gzip`,
// OTEL_EXPORTER_OTLP_COMPRESSION=gzip), through the system zlib (Debian's zlib1g-dev; Foundation
// on Linux has no public gzip). Delivery is its only user.
//
// Entry point: OTLPGzip.compress(_:). Not signal-safe.

import CZlib

enum OTLPGzip {
  /// Why a body could not be compressed (zlib's return code).
  struct Failure: Error, CustomStringConvertible {
    var code: Int32
    var description: String { "gzip failed (zlib \(code))" }
  }

  /// `bytes` as one gzip member (windowBits 15 + 16), default level.
  static func compress(_ bytes: [UInt8]) throws(Failure) -> [UInt8] {
    var stream = z_stream()
    var status = deflateInit2_(
      &stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
      Int32(MemoryLayout<z_stream>.size))
    guard status == Z_OK else { throw Failure(code: status) }
    defer { deflateEnd(&stream) }
    // deflateBound is exact enough that one call to deflate with Z_FINISH completes.
    var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))) + 32)
    var input = bytes
    let produced = input.withUnsafeMutableBufferPointer { source in
      output.withUnsafeMutableBufferPointer { destination -> Int in
        stream.next_in = source.baseAddress
        stream.avail_in = uInt(source.count)
        stream.next_out = destination.baseAddress
        stream.avail_out = uInt(destination.count)
        status = deflate(&stream, Z_FINISH)
        return destination.count - Int(stream.avail_out)
      }
    }
    guard status == Z_STREAM_END else { throw Failure(code: status) }
    output.removeSubrange(produced...)
    return output
  }
}
