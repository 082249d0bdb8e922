// CrumbsVersion.swift — the SDK's own version, for reports (`telemetry.sdk.version`).

/// This library's version, reported as `telemetry.sdk.version`.
public enum CrumbsVersion {
  public static let string = "0.1.0"
}
