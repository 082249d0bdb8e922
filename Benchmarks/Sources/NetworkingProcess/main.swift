// NetworkingProcess — a program without Crumbs that links and touches FoundationNetworking (what
// CrumbsDelivery, and so every client, linked before its transport loaded libcurl with dlopen),
// for ProcessFigures: what that library tree costs a start, memory, death and exit (see
// ProcessChildSupport).
import Foundation
import FoundationNetworking
import ProcessChildSupport

report("main \(monotonicNanoseconds())")
let arguments = ChildArguments()
let configuration = URLSessionConfiguration.default
withExtendedLifetime(configuration) {
  arguments.finish()
}
