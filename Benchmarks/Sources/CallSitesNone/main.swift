// CallSitesNone — CallSites without its 100 call sites (every addBreadcrumb statement removed,
// the rest the same), for callsites.sh: the difference in machine code between the two programs
// is what the call sites cost, including anything the compiler emits once for all of them.
//
// Every function takes the run-time values from one struct, is never inlined, and `scaffoldingOnly`
// is the same scaffolding without a call site: what callsites.sh subtracts.

import CrumbsRecorder

#if canImport(Glibc)
  import Glibc
#endif

/// Run-time values, as an application has them.
struct CallSiteValues {
  var message: String
  var status: String
  var user: String
  var order: String
  var items: String
}

/// The scaffolding alone.
@inline(never)
func scaffoldingOnly(_ values: CallSiteValues) {
  if values.message.isEmpty && values.status.isEmpty { abort() }
}

/// CallSites' literalMessageRuntimeValue, without its 25 call sites.
@inline(never)
func literalMessageRuntimeValue(_ values: CallSiteValues) {
  scaffoldingOnly(values)
}

/// CallSites' runtimeMessageOneAttribute, without its 25 call sites.
@inline(never)
func runtimeMessageOneAttribute(_ values: CallSiteValues) {
  scaffoldingOnly(values)
}

/// CallSites' noAttributes, without its 25 call sites.
@inline(never)
func noAttributes(_ values: CallSiteValues) {
  scaffoldingOnly(values)
}

/// CallSites' interpolatedMessageThreeAttributes, without its 25 call sites.
@inline(never)
func interpolatedMessageThreeAttributes(_ values: CallSiteValues) {
  scaffoldingOnly(values)
}

let values = CallSiteValues(
  message: "GET /api/v1/orders/\(getpid()) answered 200 in 12 ms", status: String(200 + Int(getpid() % 2)),
  user: "user-\(getpid())", order: "A-\(getpid())", items: String(getpid() % 7))
scaffoldingOnly(values)
literalMessageRuntimeValue(values)
runtimeMessageOneAttribute(values)
noAttributes(values)
interpolatedMessageThreeAttributes(values)
