import ArgumentParser

struct DemoCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "demo", abstract: "Run the whole story: a child records, dies, and its trail is read.")
  @Option(help: "Where the demo's files go.") var dir: String = "crumbs-demo"
  func run() throws { print("demo: not yet") }
}
