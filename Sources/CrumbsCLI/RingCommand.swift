import ArgumentParser

struct RingCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "ring", abstract: "Read and exercise breadcrumb ring files.")
}
