// NetworkingProcess — a program without Crumbs that links and touches FoundationNetworking (what
// CrumbsDelivery, and so every client, links), for ProcessFigures: it shows how much of a
// client's start, memory, death and exit is that library tree's (see ProcessChildSupport).
import Foundation
import FoundationNetworking
import ProcessChildSupport

report("main \(monotonicNanoseconds())")
let arguments = ChildArguments()
let configuration = URLSessionConfiguration.default
withExtendedLifetime(configuration) {
  arguments.finish()
}
