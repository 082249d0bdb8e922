// AppendCallgrind — N appends of one kind, for `callgrind.sh` to count instructions.
//
// Usage: AppendCallgrind KIND N   (KIND: baseline, floor-with-clock, literal, runtime, global, c-entry;
// see AppendKind)
//
// Set-up (mapping the rings, the first append's tid lookup) costs the same whatever N is, so
// callgrind.sh runs two N and divides the difference in instructions by the difference in N.

import AppendWorkloads

#if canImport(Glibc)
  import Glibc
#endif

let arguments = CommandLine.arguments
let kinds = AppendKind.allCases.map(\.rawValue).joined(separator: "|")
guard arguments.count == 3, let kind = AppendKind(rawValue: arguments[1]), let count = Int(arguments[2]),
  count >= 0
else {
  print("usage: AppendCallgrind \(kinds) N")
  exit(2)
}

do {
  let workloads = try Workloads()
  workloads.run(kind, count: 1)
  workloads.run(kind, count: count)
} catch {
  print("AppendCallgrind: \(error)")
  exit(1)
}
