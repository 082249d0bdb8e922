/// Scenarios that crash the process in each way the crash handler must catch.
let crashScenarios: [String: @Sendable ([String]) -> Int32] = [:]
