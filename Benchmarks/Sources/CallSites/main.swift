// CallSites — a consumer's release build with 100 `addBreadcrumb` call sites, for
// callsites.sh to measure the machine code each one costs (goal ≤ 1 KB a call site). Generated
// (25 call sites of each of four shapes applications write; see the functions' names) and
// checked in, so the measurement is of exactly this source. Run, it appends them all once.
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

/// 25 call sites: literalMessageRuntimeValue.
@inline(never)
func literalMessageRuntimeValue(_ values: CallSiteValues) {
  addBreadcrumb(
    "GET /api/v1/items answered, call site 0", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 1", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 2", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 3", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 4", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 5", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 6", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 7", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 8", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 9", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 10", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 11", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 12", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 13", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 14", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 15", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 16", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 17", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 18", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 19", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 20", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 21", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 22", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 23", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
  addBreadcrumb(
    "GET /api/v1/items answered, call site 24", level: .info, type: .http,
    attributes: ["method": "GET", "status": values.status])
}

/// 25 call sites: runtimeMessageOneAttribute.
@inline(never)
func runtimeMessageOneAttribute(_ values: CallSiteValues) {
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "0"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "1"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "2"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "3"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "4"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "5"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "6"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "7"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "8"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "9"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "10"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "11"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "12"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "13"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "14"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "15"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "16"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "17"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "18"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "19"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "20"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "21"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "22"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "23"])
  addBreadcrumb(
    values.message, level: .warning, type: .user, attributes: ["user.id": values.user, "site": "24"])
}

/// 25 call sites: noAttributes.
@inline(never)
func noAttributes(_ values: CallSiteValues) {
  addBreadcrumb("step 0 done")
  addBreadcrumb("step 1 done")
  addBreadcrumb("step 2 done")
  addBreadcrumb("step 3 done")
  addBreadcrumb("step 4 done")
  addBreadcrumb("step 5 done")
  addBreadcrumb("step 6 done")
  addBreadcrumb("step 7 done")
  addBreadcrumb("step 8 done")
  addBreadcrumb("step 9 done")
  addBreadcrumb("step 10 done")
  addBreadcrumb("step 11 done")
  addBreadcrumb("step 12 done")
  addBreadcrumb("step 13 done")
  addBreadcrumb("step 14 done")
  addBreadcrumb("step 15 done")
  addBreadcrumb("step 16 done")
  addBreadcrumb("step 17 done")
  addBreadcrumb("step 18 done")
  addBreadcrumb("step 19 done")
  addBreadcrumb("step 20 done")
  addBreadcrumb("step 21 done")
  addBreadcrumb("step 22 done")
  addBreadcrumb("step 23 done")
  addBreadcrumb("step 24 done")
}

/// 25 call sites: interpolatedMessageThreeAttributes.
@inline(never)
func interpolatedMessageThreeAttributes(_ values: CallSiteValues) {
  addBreadcrumb(
    "order \(values.order) shipped from site 0", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 1", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 2", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 3", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 4", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 5", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 6", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 7", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 8", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 9", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 10", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 11", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 12", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 13", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 14", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 15", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 16", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 17", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 18", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 19", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 20", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 21", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 22", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 23", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
  addBreadcrumb(
    "order \(values.order) shipped from site 24", type: .system,
    attributes: ["carrier": "dhl", "order": values.order, "items": values.items])
}

let values = CallSiteValues(
  message: "GET /api/v1/orders/\(getpid()) answered 200 in 12 ms", status: String(200 + Int(getpid() % 2)),
  user: "user-\(getpid())", order: "A-\(getpid())", items: String(getpid() % 7))
scaffoldingOnly(values)
literalMessageRuntimeValue(values)
runtimeMessageOneAttribute(values)
noAttributes(values)
interpolatedMessageThreeAttributes(values)
