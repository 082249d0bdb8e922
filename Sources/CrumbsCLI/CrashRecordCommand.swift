import ArgumentParser

struct CrashRecordCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "crash-record", abstract: "Read crash record files.")
}
