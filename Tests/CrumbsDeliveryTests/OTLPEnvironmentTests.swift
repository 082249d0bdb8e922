// OTLPEnvironmentTests.swift — the OTEL_* variables, from an injected environment (no
// process-wide environment is changed): endpoints, headers, protocol, compression, timeout,
// resource, what code configuration keeps, and malformed values named, never trapping.

import Testing

@testable import CrumbsDelivery

@Suite struct OTLPEnvironmentTests {
  @Test func theGenericEndpointGetsTheLogsPathAndTheSignalEndpointIsUsedAsIs() {
    #expect(
      OTLPEnvironment(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]).logsURL
        == "http://collector:4318/v1/logs")
    #expect(
      OTLPEnvironment(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/base/"]).logsURL
        == "http://collector:4318/base/v1/logs")
    let both = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
      "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://logs.example:443/custom/path",
    ])
    #expect(both.logsURL == "https://logs.example:443/custom/path")
    let destination = both.destination()
    #expect(destination?.logsURL == "https://logs.example:443/custom/path")
    #expect(OTLPEnvironment([:]).destination() == nil)
  }

  @Test func headersArePercentDecodedSecretAndEachSignalsListWinsByNameOnItsOwnRequests() throws {
    let environment = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
      "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20dXNlcjpwdw%3D%3D, X-Tenant=a",
      "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "x-tenant=logs%2Cteam, X-Dataset=crashes",
      "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "X-Dataset=spans",
      "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "Authorization=Bearer%20metrics",
    ])
    #expect(environment.problems.isEmpty)
    #expect(
      environment.headers
        == [
          HTTPHeader("Authorization", "Basic dXNlcjpwdw==", isSecret: true),
          HTTPHeader("X-Tenant", "a", isSecret: true),
        ])
    #expect(environment.signalHeaders[.traces] == [HTTPHeader("X-Dataset", "spans", isSecret: true)])
    // What each request carries: the generic list, its signal's own over it by name.
    let destination = try #require(environment.destination())
    func sent(_ signal: OTLPDestination.Signal, from destination: OTLPDestination) -> [String: String] {
      let extra = destination.headers(gzip: false, signal: signal).filter { $0.name != "Content-Type" }
      return Dictionary(extra.map { ($0.name.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
    }
    #expect(
      sent(.logs, from: destination)
        == ["authorization": "Basic dXNlcjpwdw==", "x-tenant": "logs,team", "x-dataset": "crashes"])
    #expect(
      sent(.traces, from: destination)
        == ["authorization": "Basic dXNlcjpwdw==", "x-tenant": "a", "x-dataset": "spans"])
    #expect(sent(.metrics, from: destination) == ["authorization": "Bearer metrics", "x-tenant": "a"])
    #expect(destination.signalHeaders.values.joined().allSatisfy { $0.isSecret })
    // The requests themselves.
    let traces = try #require(
      destination.request(
        forTraces: OTLPTraceBatch(resource: [], scopeName: "crumbs", scopeVersion: "0", spans: []), id: "t"))
    #expect(traces.headers.contains { $0.name == "X-Dataset" && $0.value == "spans" })
    #expect(!traces.headers.contains { $0.value == "crashes" }, "the logs' own list stays on the logs")
    // Code wins: a header it names, for every request or for one signal, keeps its value.
    var configured = OTLPDestination(endpoint: "http://code:4318", headers: [HTTPHeader("X-Tenant", "code")])
    configured.signalHeaders[.traces] = [HTTPHeader("X-Dataset", "code-spans")]
    let applied = environment.apply(to: configured, compressionSetInCode: false)
    #expect(sent(.logs, from: applied)["x-tenant"] == "code")
    #expect(sent(.logs, from: applied)["x-dataset"] == "crashes")
    #expect(sent(.traces, from: applied)["x-dataset"] == "code-spans")
    #expect(sent(.metrics, from: applied)["authorization"] == "Bearer metrics")
  }

  @Test func aMetricsURLIsTheSignalsOwnOrTheBasesEvenBesideALogsURLGivenAsIs() {
    let both = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/",
      "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://l:4318/custom/logs",
    ])
    #expect(both.destination()?.logsURL == "http://l:4318/custom/logs")
    #expect(both.destination()?.metricsURL == "http://c:4318/v1/metrics")
    #expect(both.destination()?.tracesURL == "http://c:4318/v1/traces")
    let own = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://l:4318/custom/logs",
      "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:4318/custom/metrics",
    ])
    #expect(own.destination()?.metricsURL == "http://m:4318/custom/metrics")
    let logsOnly = OTLPEnvironment(["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://l:4318/custom/logs"])
    #expect(logsOnly.destination()?.metricsURL == nil, "a logs URL given as is names no metrics URL")
    // A metrics URL given as is applies to a destination configured in code too.
    let applied = own.apply(to: OTLPDestination(endpoint: "http://code:4318"), compressionSetInCode: false)
    #expect(applied.metricsURL == "http://m:4318/custom/metrics")
    #expect(applied.logsURL == "http://code:4318/v1/logs")
    let bad = OTLPEnvironment(["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "ftp://m"])
    #expect(bad.problems.contains { $0.hasPrefix("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT ignored") })
  }

  @Test func protocolCompressionAndTimeout() {
    let environment = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
      "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
    ])
    #expect(environment.problems.isEmpty)
    let destination = environment.destination()
    #expect(destination?.encoding == .json)
    #expect(destination?.compression == .gzip)
    #expect(destination?.timeout == 2.5)
    // The logs variables win over the generic ones.
    let logs = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf",
    ])
    #expect(logs.encoding == .protobuf)
  }

  @Test func malformedValuesAreNamedAndIgnored() {
    let environment = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
      "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd",
      "OTEL_EXPORTER_OTLP_TIMEOUT": "soon",
      "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318",
      "OTEL_EXPORTER_OTLP_HEADERS": "Authorization Bearer-s3cret",
      "OTEL_RESOURCE_ATTRIBUTES": "team=core,broken%zz=x,bad=%zz",
    ])
    #expect(environment.encoding == nil)
    #expect(environment.compression == nil)
    #expect(environment.timeout == nil)
    #expect(environment.logsURL == nil)
    #expect(environment.headers.isEmpty)
    // A malformed list is discarded whole, as the SDK specification says.
    #expect(environment.resourceAttributes.isEmpty)
    let problems = environment.problems.joined(separator: "\n")
    #expect(environment.problems.count == 6)
    #expect(problems.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported"))
    #expect(problems.contains("OTEL_EXPORTER_OTLP_COMPRESSION=zstd"))
    #expect(problems.contains("OTEL_EXPORTER_OTLP_TIMEOUT=soon"))
    #expect(problems.contains("OTEL_EXPORTER_OTLP_ENDPOINT ignored"))
    #expect(problems.contains("OTEL_EXPORTER_OTLP_HEADERS ignored: member 1 has no '='"))
    #expect(problems.contains("OTEL_RESOURCE_ATTRIBUTES ignored"))
    // A header value never appears in a problem.
    #expect(!problems.contains("s3cret"))
  }

  @Test func resourceFromTheEnvironmentWithCodeWinning() {
    let environment = OTLPEnvironment([
      "OTEL_RESOURCE_ATTRIBUTES":
        "service.name=from-attributes,deployment.environment.name=prod%20eu,team=core",
      "OTEL_SERVICE_NAME": "from-service-name",
    ])
    #expect(
      environment.resource(appName: nil)
        == ["service.name": "from-service-name", "deployment.environment.name": "prod eu", "team": "core"])
    #expect(environment.resource(appName: "from-code")["service.name"] == "from-code")
    #expect(
      OTLPEnvironment(["OTEL_RESOURCE_ATTRIBUTES": "service.name=only"]).resource(appName: nil)[
        "service.name"]
        == "only")
  }

  @Test func configurationInCodeWins() {
    let environment = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=env,X-Extra=1",
      "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TIMEOUT": "1000",
    ])
    var code = OTLPDestination(endpoint: "http://code:4318", headers: [HTTPHeader("authorization", "code")])
    code.timeout = 7
    let applied = environment.apply(to: code, compressionSetInCode: true)
    #expect(applied.endpoint == "http://code:4318")
    #expect(
      applied.headers == [HTTPHeader("authorization", "code"), HTTPHeader("X-Extra", "1", isSecret: true)])
    #expect(applied.compression == .none)
    #expect(applied.timeout == 7)
    let unset = environment.apply(
      to: OTLPDestination(endpoint: "http://code:4318"), compressionSetInCode: false)
    #expect(unset.compression == .gzip)
    #expect(unset.timeout == 1)
  }
}
