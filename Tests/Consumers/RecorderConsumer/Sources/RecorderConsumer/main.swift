// Records the way docs/client.md#record-only shows: a ring directory, a ring, install, the crash
// handler, breadcrumbs (one built at run time), and a return from main: no close by hand, the exit
// hook `install()` armed marks the ring clean. Its one argument is the Crumbs directory; it prints
// the ring file's path.
import CrumbsRecorder

let directory = try RingDirectory(path: CommandLine.arguments[1])
var options = RingOptions()
options.appName = "recorder-consumer"
let ring = try directory.createRing(options: options)
ring.install()
try CrashHandler.install(ring: ring)
let status = String(200 + CommandLine.arguments.count - 2)
addBreadcrumb("GET /items → \(status)", level: .info, type: .http, attributes: ["status": status])
addBreadcrumb("consumer done", level: .warning)
print(ring.path)
