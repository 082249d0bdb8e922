#!/usr/bin/env python3
"""Decode a captured OTLP/HTTP logs body with the official protobuf classes (PyPI
`opentelemetry-proto`) and print it as JSON for DeliveryTests.

Usage: decode_otlp.py BODY_FILE [--json] [--gzip]
       decode_otlp.py --partial-success REJECTED MESSAGE [--json]
       decode_otlp.py --metrics BODY_FILE [--json] [--gzip]
       decode_otlp.py --traces BODY_FILE [--json] [--gzip]
  BODY_FILE  the request body as the server received it
  --json     the body is OTLP/JSON (parsed with google.protobuf.json_format into the same message)
  --gzip     the body is gzip-compressed (Content-Encoding: gzip): gunzipped first
  --partial-success  prints (to stdout, raw) an ExportLogsServiceResponse whose partial_success
             rejected REJECTED records with MESSAGE, as a collector answers: binary, or
             OTLP/JSON with --json

Output: one JSON object
  {"records": [{"time_unix_nano", "observed_time_unix_nano", "severity_number", "severity_text",
                "event_name", "body", "attributes": {key: value}, "attribute_types": {key:
                the AnyValue member set, e.g. "int_value"}, "trace_id" (hex, "" when unset),
                "span_id" (hex), "flags"}],
   "resource": {key: value}, "scope": {"name", "version"},
   "trail_jsonl": "<the bytes attribute crumbs.breadcrumbs.jsonl.lz4, decompressed by `lz4 -d`>",
   "trail_error": "<what `lz4 -d` said, when it could not decompress that attribute>"}
With --metrics the body is an ExportMetricsServiceRequest, printed as
  {"resource_metrics": [{"resource": {key: value}, "scope": {"name", "version"},
    "metrics": [{"name", "description", "unit", "kind" ("sum", "gauge"…), "is_monotonic",
                 "aggregation_temporality" (1 delta, 2 cumulative),
                 "points": [{"attributes": {key: value}, "start_time_unix_nano",
                             "time_unix_nano", "as_int" (or "as_double")}]}]}]}
With --traces the body is an ExportTraceServiceRequest, printed as
  {"resource_spans": [{"resource": {key: value}, "scope": {"name", "version"},
    "spans": [{"trace_id", "span_id", "parent_span_id" (hex, "" when unset), "name", "kind",
               "start_time_unix_nano", "end_time_unix_nano", "attributes": {key: value},
               "status": {"code", "message"},
               "links": [{"trace_id", "span_id", "attributes": {key: value}}]}]}]}
Attribute values: strings/ints/bools/doubles as JSON, bytes as {"bytes_len": n}, arrays as lists,
kvlists as objects. Exit status 2 when the module is missing (run `make test` to install it).
"""
import base64
import json
import subprocess
import sys

try:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
        ExportLogsServiceResponse,
    )
except ImportError as error:  # pragma: no cover
    print(f"decode_otlp.py: {error}; install with: python3 -m pip install opentelemetry-proto", file=sys.stderr)
    sys.exit(2)


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "string_value":
        return any_value.string_value
    if kind == "bool_value":
        return any_value.bool_value
    if kind == "int_value":
        return any_value.int_value
    if kind == "double_value":
        return any_value.double_value
    if kind == "bytes_value":
        return {"bytes_len": len(any_value.bytes_value)}
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in any_value.kvlist_value.values}
    return None


def metrics(arguments):
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    with open(arguments[0], "rb") as f:
        body = f.read()
    if "--gzip" in arguments[1:]:
        import gzip
        body = gzip.decompress(body)
    request = ExportMetricsServiceRequest()
    if "--json" in arguments[1:]:
        json_format.Parse(body.decode("utf-8"), request)
    else:
        request.ParseFromString(body)
    out = {"resource_metrics": []}
    for resource_metrics in request.resource_metrics:
        entry = {
            "resource": {kv.key: value(kv.value) for kv in resource_metrics.resource.attributes},
            "metrics": [],
        }
        for scope_metrics in resource_metrics.scope_metrics:
            entry["scope"] = {"name": scope_metrics.scope.name, "version": scope_metrics.scope.version}
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                data = getattr(metric, kind)
                points = []
                for point in data.data_points:
                    decoded = {
                        "attributes": {kv.key: value(kv.value) for kv in point.attributes},
                        "start_time_unix_nano": str(point.start_time_unix_nano),
                        "time_unix_nano": str(point.time_unix_nano),
                    }
                    number = point.WhichOneof("value")
                    if number is not None:
                        decoded[number] = getattr(point, number)
                    points.append(decoded)
                entry["metrics"].append({
                    "name": metric.name,
                    "description": metric.description,
                    "unit": metric.unit,
                    "kind": kind,
                    "is_monotonic": bool(getattr(data, "is_monotonic", False)),
                    "aggregation_temporality": int(getattr(data, "aggregation_temporality", 0)),
                    "points": points,
                })
        out["resource_metrics"].append(entry)
    json.dump(out, sys.stdout)


def traces(arguments):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    with open(arguments[0], "rb") as f:
        body = f.read()
    if "--gzip" in arguments[1:]:
        import gzip
        body = gzip.decompress(body)
    request = ExportTraceServiceRequest()
    if "--json" in arguments[1:]:
        # Ids in hex (OTLP spec, "JSON Protobuf Encoding"): base64 first, as collectors do.
        document = json.loads(body.decode("utf-8"))
        for resource_spans in document.get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                for span in scope_spans.get("spans", []):
                    for holder in [span] + span.get("links", []):
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if key in holder:
                                holder[key] = base64.b64encode(bytes.fromhex(holder[key])).decode("ascii")
        json_format.ParseDict(document, request)
    else:
        request.ParseFromString(body)
    out = {"resource_spans": []}
    for resource_spans in request.resource_spans:
        entry = {
            "resource": {kv.key: value(kv.value) for kv in resource_spans.resource.attributes},
            "spans": [],
        }
        for scope_spans in resource_spans.scope_spans:
            entry["scope"] = {"name": scope_spans.scope.name, "version": scope_spans.scope.version}
            for span in scope_spans.spans:
                entry["spans"].append({
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": int(span.kind),
                    "start_time_unix_nano": str(span.start_time_unix_nano),
                    "end_time_unix_nano": str(span.end_time_unix_nano),
                    "attributes": {kv.key: value(kv.value) for kv in span.attributes},
                    "status": {"code": int(span.status.code), "message": span.status.message},
                    "links": [
                        {
                            "trace_id": link.trace_id.hex(),
                            "span_id": link.span_id.hex(),
                            "attributes": {kv.key: value(kv.value) for kv in link.attributes},
                        }
                        for link in span.links
                    ],
                })
        out["resource_spans"].append(entry)
    json.dump(out, sys.stdout)


def main():
    if sys.argv[1] == "--metrics":
        metrics(sys.argv[2:])
        return
    if sys.argv[1] == "--traces":
        traces(sys.argv[2:])
        return
    if sys.argv[1] == "--partial-success":
        response = ExportLogsServiceResponse()
        response.partial_success.rejected_log_records = int(sys.argv[2])
        response.partial_success.error_message = sys.argv[3]
        if "--json" in sys.argv[4:]:
            sys.stdout.write(json_format.MessageToJson(response))
        else:
            sys.stdout.buffer.write(response.SerializeToString())
        return
    path = sys.argv[1]
    with open(path, "rb") as f:
        body = f.read()
    if "--gzip" in sys.argv[2:]:
        import gzip
        body = gzip.decompress(body)
    request = ExportLogsServiceRequest()
    if "--json" in sys.argv[2:]:
        # OTLP/JSON spells traceId and spanId in hex, not proto3 JSON's base64 (OTLP spec,
        # "JSON Protobuf Encoding"): turned into base64 first, as collectors do.
        document = json.loads(body.decode("utf-8"))
        for resource_logs in document.get("resourceLogs", []):
            for scope_logs in resource_logs.get("scopeLogs", []):
                for record in scope_logs.get("logRecords", []):
                    for key in ("traceId", "spanId"):
                        if key in record:
                            record[key] = base64.b64encode(bytes.fromhex(record[key])).decode("ascii")
        json_format.ParseDict(document, request)
    else:
        request.ParseFromString(body)
    out = {"records": [], "resource": {}, "scope": {}, "trail_jsonl": None}
    trail = None
    for resource_logs in request.resource_logs:
        out["resource"] = {kv.key: value(kv.value) for kv in resource_logs.resource.attributes}
        for scope_logs in resource_logs.scope_logs:
            out["scope"] = {"name": scope_logs.scope.name, "version": scope_logs.scope.version}
            for record in scope_logs.log_records:
                attributes = {}
                # JSON output alone does not keep 4.0 apart from 4 once parsed: the member says.
                attribute_types = {}
                for kv in record.attributes:
                    attributes[kv.key] = value(kv.value)
                    attribute_types[kv.key] = kv.value.WhichOneof("value")
                    if kv.key == "crumbs.breadcrumbs.jsonl.lz4" and kv.value.WhichOneof("value") == "bytes_value":
                        trail = kv.value.bytes_value
                out["records"].append({
                    "time_unix_nano": str(record.time_unix_nano),
                    "observed_time_unix_nano": str(record.observed_time_unix_nano),
                    "severity_number": int(record.severity_number),
                    "severity_text": record.severity_text,
                    "event_name": record.event_name,
                    "body": value(record.body),
                    "attributes": attributes,
                    "attribute_types": attribute_types,
                    "trace_id": record.trace_id.hex(),
                    "span_id": record.span_id.hex(),
                    "flags": int(record.flags),
                })
    if trail is not None:
        lz4 = subprocess.run(["lz4", "-dc"], input=trail, capture_output=True)
        if lz4.returncode == 0:
            out["trail_jsonl"] = lz4.stdout.decode("utf-8")
        else:
            out["trail_error"] = lz4.stderr.decode("utf-8", "replace").strip()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
