/// Scenarios that exercise the ring from a separate process.
let ringScenarios: [String: @Sendable ([String]) -> Int32] = [:]
