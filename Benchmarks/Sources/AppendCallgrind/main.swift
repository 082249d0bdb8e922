// AppendCallgrind — N appends of one kind, for `callgrind.sh` to count instructions.
//
// Usage: AppendCallgrind ring|global|c-entry|baseline N
//
// Set-up (mapping the ring, the first append's tid lookup) costs the same whatever N is, so
// callgrind.sh runs two N and divides the difference in instructions by the difference in N.

import AppendWorkloads

#if canImport(Glibc)
  import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]), count >= 0 else {
  print("usage: AppendCallgrind ring|global|c-entry|baseline N")
  exit(2)
}

do {
  switch arguments[1] {
  case "ring":
    let fixture = try RingFixture()
    appendToRing(fixture.ring, count: 1)
    appendToRing(fixture.ring, count: count)
  case "global":
    let fixture = try RingFixture(install: true)
    withExtendedLifetime(fixture) {
      addBreadcrumbs(count: 1)
      addBreadcrumbs(count: count)
    }
  case "c-entry":
    let fixture = try RingFixture(install: true)
    withExtendedLifetime(fixture) {
      addBreadcrumbsFromC(count: 1)
      addBreadcrumbsFromC(count: count)
    }
  case "baseline":
    let fixture = try BaselineFixture()
    appendToBaseline(fixture, count: 1)
    appendToBaseline(fixture, count: count)
  default:
    print("usage: AppendCallgrind ring|global|c-entry|baseline N")
    exit(2)
  }
} catch {
  print("AppendCallgrind: \(error)")
  exit(1)
}
