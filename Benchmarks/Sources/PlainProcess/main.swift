// PlainProcess — a Swift program without Crumbs, for ProcessFigures (see ProcessChildSupport).
import ProcessChildSupport

report("main \(monotonicNanoseconds())")
ChildArguments().finish()
