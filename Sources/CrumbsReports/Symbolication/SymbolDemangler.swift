// SymbolDemangler.swift — readable names for mangled symbols, in process, no subprocess.
//
// Entry points, in call order:
//   SymbolDemangler.demangle(_:style:)   Swift names through the runtime's own `swift_demangle`
//                                        (libswiftCore, always loaded in a Swift process); C++
//                                        names through `__cxa_demangle` (libstdc++, which
//                                        libswiftCore links); anything else is returned as is
//   SymbolDemangler.readable(_:)         the name as a person reads it in a stack trace
//                                        (`TestCrash.writeThroughNull()`): the Swift runtime
//                                        backtracer's own rendering (`_swift_backtrace_demangle`)
//                                        without specialization, thunk and `static` prefixes
//   SymbolDemangler.demangleType(_:)     a C++ type name as type_info::name() gives it
//   SymbolDemangler.simplify(_:)         the `.simplified` style: the full Swift name without
//                                        `Swift.` qualifiers, extension markers and return type
//
// Both C functions are looked up once with dlsym and called through `@convention(c)` function
// types, which spell their C signatures exactly (`@_silgen_name` would call them with the Swift
// calling convention). Not signal-safe (mallocs).

#if canImport(Glibc)
  import Glibc
#endif

/// How much of a demangled Swift name to keep.
public enum SymbolNameStyle: String, Sendable, Codable {
  /// Everything the demangler prints: `CrumbsTests.Cache.lookup(Swift.String) -> Swift.Int`.
  case full
  /// Without `Swift.` qualifiers, `(extension in M):` markers and the return type:
  /// `CrumbsTests.Cache.lookup(String)`.
  case simplified
}

package enum SymbolDemangler {
  /// char *swift_demangle(const char *mangledName, size_t mangledNameLength, char *outputBuffer,
  ///                      size_t *outputBufferSize, uint32_t flags)
  package typealias SwiftDemangle =
    @convention(c) (
      UnsafePointer<CChar>?, Int, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?, UInt32
    ) -> UnsafeMutablePointer<CChar>?
  /// char *__cxa_demangle(const char *mangled, char *buffer, size_t *length, int *status)
  package typealias CxxDemangle =
    @convention(c) (
      UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?,
      UnsafeMutablePointer<Int32>?
    ) -> UnsafeMutablePointer<CChar>?

  /// char *_swift_backtrace_demangle(const char *rawName, size_t rawNameLength,
  ///                                  char *outputBuffer, size_t *outputBufferSize)
  /// libswiftCore's entry for the runtime backtracer (Swift 5.9 and later): Swift names with
  /// its simplified options (no module names, no parameter types), C++ names via __cxa_demangle.
  package typealias BacktraceDemangle =
    @convention(c) (UnsafePointer<CChar>?, Int, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?) ->
    UnsafeMutablePointer<CChar>?

  package static let swiftDemangle: SwiftDemangle? = lookUp("swift_demangle", as: SwiftDemangle.self)
  package static let backtraceDemangle: BacktraceDemangle? = lookUp(
    "_swift_backtrace_demangle", as: BacktraceDemangle.self)
  package static let cxxDemangle: CxxDemangle? = lookUp("__cxa_demangle", as: CxxDemangle.self)

  package static func lookUp<Function>(_ name: String, as type: Function.Type) -> Function? {
    // A nil handle is RTLD_DEFAULT: search every loaded object.
    guard let address = dlsym(nil, name) else { return nil }
    return unsafeBitCast(address, to: type)
  }

  /// Whether `name` looks like a Swift mangled name (current, Swift 4 and embedded manglings).
  package static func isSwiftSymbol(_ name: String) -> Bool {
    name.hasPrefix("$s") || name.hasPrefix("$S") || name.hasPrefix("_$s") || name.hasPrefix("$e")
      || name.hasPrefix("_T0")
  }

  /// The readable form of `name`, or nil when it is not a mangled name the process can demangle.
  package static func demangle(_ name: String, style: SymbolNameStyle = .full) -> String? {
    if isSwiftSymbol(name), let swiftDemangle {
      let utf8 = Array(name.utf8)
      let result = utf8.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { swiftDemangle($0.baseAddress, $0.count, nil, nil, 0) }
      }
      guard let result else { return nil }
      defer { free(result) }
      let full = String(cString: result)
      guard full != name else { return nil }
      return style == .full ? full : simplify(full)
    }
    if name.hasPrefix("_Z"), let cxxDemangle {
      var status: Int32 = -1
      guard let result = cxxDemangle(name, nil, nil, &status) else { return nil }
      defer { free(result) }
      return status == 0 ? String(cString: result) : nil
    }
    return nil
  }

  /// Words in front of a name that say how the compiler made the function, not which one it is.
  static let readablePrefixes = [
    "specialized ", "merged ", "partial apply for ", "dispatch thunk of ", "static ", "@objc ",
  ]

  /// `name` (a symbol as found in a symbol table) as a person reads it in a stack trace, the way
  /// the Swift runtime backtracer prints it: Swift names without module names, parameter types
  /// and return type, and without the specialization, thunk and `static` words in front
  /// (`$s6Crumbs9TestCrashO16writeThroughNulls5NeverOyFZTf4d_n`, "function signature
  /// specialization <Arg[0] = Dead> of static Crumbs.TestCrash.writeThroughNull() ->
  /// Swift.Never", reads `TestCrash.writeThroughNull()`); C++ names demangled; C names as they
  /// are. Nil for a mangled name the process cannot demangle.
  package static func readable(_ name: String) -> String? {
    var text: String
    if isSwiftSymbol(name) || name.hasPrefix("_Z"), let backtraceDemangle {
      // NUL-terminated, though the length is passed: for C++ names the runtime hands the
      // pointer to __cxa_demangle, which reads to the NUL (an array of the UTF-8 bytes alone
      // let it read past the name into whatever followed, appending it to the result).
      let result = name.withCString { backtraceDemangle($0, name.utf8.count, nil, nil) }
      guard let result else { return demangle(name, style: .simplified) }
      defer { free(result) }
      text = String(cString: result)
    } else if isSwiftSymbol(name) || name.hasPrefix("_Z") {
      guard let demangled = demangle(name, style: .simplified) else { return nil }
      text = demangled
    } else {
      return name
    }
    var dropped = true
    while dropped {
      dropped = false
      for prefix in readablePrefixes where text.hasPrefix(prefix) && text.count > prefix.count {
        text.removeFirst(prefix.count)
        dropped = true
      }
    }
    return text
  }

  /// A C++ type's readable name from its mangling as `type_info::name()` gives it
  /// (`St13runtime_error` → `std::runtime_error`, `N3app5ErrorE` → `app::Error`); nil when the
  /// process cannot demangle it.
  package static func demangleType(_ mangled: String) -> String? {
    guard !mangled.isEmpty, let cxxDemangle else { return nil }
    var status: Int32 = -1
    guard let result = cxxDemangle(mangled, nil, nil, &status) else { return nil }
    defer { free(result) }
    return status == 0 ? String(cString: result) : nil
  }

  /// Drops `Swift.` qualifiers, `(extension in Module):` markers and the top-level return type.
  package static func simplify(_ full: String) -> String {
    var text = Substring(full)
    var output = ""
    output.reserveCapacity(full.utf8.count)
    while !text.isEmpty {
      if text.hasPrefix("(extension in "), let colon = text.firstIndex(of: ":") {
        text = text[text.index(after: colon)...]
        continue
      }
      if text.hasPrefix("Swift."), output.last.map({ !($0.isLetter || $0.isNumber || $0 == "_") }) ?? true {
        text = text.dropFirst(6)
        continue
      }
      output.append(text.removeFirst())
    }
    // The return type follows the first top-level parameter list: " -> T" at depth 0.
    var depth = 0
    var index = output.startIndex
    while index < output.endIndex {
      if output[index...].hasPrefix(" -> ") {
        // Only a function's own arrow, right after its parameter list at depth 0.
        if depth == 0, index > output.startIndex, output[output.index(before: index)] == ")" {
          let rest = output[output.index(index, offsetBy: 4)...]
          // Keep trailing context such as " in Foo.bar()" of closures.
          if let inRange = rest.firstRange(of: " in ") {
            output = String(output[..<index]) + String(rest[inRange.lowerBound...])
          } else {
            output = String(output[..<index])
          }
          break
        }
        index = output.index(index, offsetBy: 4)
        continue
      }
      let character = output[index]
      if character == "(" || character == "<" || character == "[" { depth += 1 }
      if character == ")" || character == ">" || character == "]" { depth = max(0, depth - 1) }
      index = output.index(after: index)
    }
    return output
  }
}
