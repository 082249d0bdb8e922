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

  @Test func headersArePercentDecodedSecretAndTheLogsListWinsByName() {
    let environment = OTLPEnvironment([
      "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20dXNlcjpwdw%3D%3D, X-Tenant=a",
      "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "x-tenant=logs%2Cteam",
    ])
    #expect(environment.problems.isEmpty)
    #expect(
      environment.headers
        == [
          HTTPHeader("Authorization", "Basic dXNlcjpwdw==", isSecret: true),
          HTTPHeader("x-tenant", "logs,team", isSecret: true),
        ])
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
