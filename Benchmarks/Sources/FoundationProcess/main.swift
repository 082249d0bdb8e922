// FoundationProcess — a program without Crumbs that links and touches Foundation but not
// FoundationNetworking, for ProcessFigures: next to NetworkingProcess it splits a client's end
// into what Foundation (and ICU) costs and what FoundationNetworking's tree (libcurl and its TLS
// and protocol libraries) adds (see ProcessChildSupport).
import Foundation
import ProcessChildSupport

report("main \(monotonicNanoseconds())")
let arguments = ChildArguments()
let directory = URL(fileURLWithPath: arguments.directory)
withExtendedLifetime(directory) {
  _ = FileManager.default.fileExists(atPath: directory.path)
  arguments.finish()
}
