#!/usr/bin/env python3
"""check-dependency-closure.py — the arrows test and fuzz targets must keep (issue 22). Run by `make test`.

`swift package show-dependencies` lists packages, not targets, so this reads
`swift package dump-package` (the manifest as JSON: no build), follows every target's
dependencies on this package's own targets (products of other packages are not ours, so they
end the walk) and fails when a target's closure reaches a module it must not link: a
recorder-level test that pulled in the reports would no longer prove the recorder stands alone.

It also keeps the layering of the sources: CrumbsPlatform depends on none of our targets and no
product names it, and CrumbsRecorder is the only door to C: no other module under Sources/
depends on CrumbsSignalPath or imports it. The collector (CrumbsCollector) is a library the
SDK's modules never link and that links no command-line parser: `crumbs collect` parses.
An optional integration's package (swift-metrics) is reached only through its own product
(CrumbsMetrics): no other product's closure names it, so `import Crumbs` links no metrics; the
same holds for hummingbird (CrumbsHummingbird) and vapor (CrumbsVapor).

Usage: Scripts/check-dependency-closure.py [DUMP.json]   (default: runs `$SWIFT package dump-package`)
"""

import json
import os
import subprocess
import sys

ABOVE_RECORDER = {"CrumbsReports", "CrumbsDelivery", "Crumbs"}
ABOVE_REPORTS = {"CrumbsDelivery", "Crumbs"}
ABOVE_DELIVERY = {"Crumbs"}
APPS_NEVER_LINK = {"CrumbsCollector", "CrumbsCLI"}

# Target → modules that must not be in its dependency closure.
FORBIDDEN = {
    "CrumbsRecorder": ABOVE_RECORDER,
    "CrumbsTestSupport": ABOVE_RECORDER,
    "CrumbsRecorderTests": ABOVE_RECORDER,
    "FuzzRingReader": ABOVE_RECORDER,
    "FuzzCrashRecordReader": ABOVE_RECORDER,
    "FuzzCFIReader": ABOVE_RECORDER,
    "CrumbsLoggingTests": ABOVE_RECORDER,
    "CrumbsReportTestSupport": ABOVE_REPORTS,
    "CrumbsReportsTests": ABOVE_REPORTS,
    "FuzzStoredReport": ABOVE_REPORTS,
    "FuzzELFReader": ABOVE_REPORTS,
    "CrumbsDeliveryTestSupport": ABOVE_DELIVERY,
    "CrumbsDeliveryTests": ABOVE_DELIVERY,
    "CrumbsFuzzRegressionTests": ABOVE_DELIVERY,
    "FuzzHTTPHeaders": ABOVE_DELIVERY,
    "FuzzTrailEntries": ABOVE_DELIVERY,
    # What an app links never links the collector or the command line: they run from outside.
    "Crumbs": APPS_NEVER_LINK,
    "CrumbsLogging": APPS_NEVER_LINK,
    "CrumbsServiceLifecycle": APPS_NEVER_LINK,
    "CrumbsTracing": APPS_NEVER_LINK,
    "CrumbsMetrics": APPS_NEVER_LINK,
    "CrumbsHummingbird": APPS_NEVER_LINK,
    "CrumbsVapor": APPS_NEVER_LINK,
    "CrumbsTests": APPS_NEVER_LINK,
}

# Packages of optional integrations → the only targets whose closure may name their products.
OPTIONAL_PACKAGES = {
    "swift-metrics": {"CrumbsMetrics", "CrumbsMetricsTests"},
    # The web frameworks, each behind a package trait as well (docs/server.md).
    "hummingbird": {"CrumbsHummingbird"},
    "vapor": {"CrumbsVapor"},
}

# Products of other packages a target must not name (the collector leaves parsing to the CLI).
FORBIDDEN_PRODUCTS = {
    "CrumbsCollector": {"ArgumentParser"},
}


def dependencies(target, names):
    """This package's targets that `target` names directly."""
    found = []
    for dependency in target["dependencies"]:
        kind, value = next(iter(dependency.items()))
        if kind in ("byName", "target") and value[0] in names:
            found.append(value[0])
    return found


def paths_to_forbidden(start, graph, forbidden):
    """Every forbidden module reachable from `start`, each with one path that reaches it."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        current = queue.pop(0)
        for dependency in graph[current]:
            if dependency not in paths:
                paths[dependency] = paths[current] + [dependency]
                queue.append(dependency)
    return {name: paths[name] for name in forbidden if name in paths}


def closure(start, graph):
    """`start` and every one of our targets it reaches."""
    seen = {start}
    queue = [start]
    while queue:
        for dependency in graph[queue.pop(0)]:
            if dependency not in seen:
                seen.add(dependency)
                queue.append(dependency)
    return seen


def optional_package_failures(targets, graph):
    """Every target outside an optional package's own whose closure names one of its products."""
    failures = []
    for package, allowed in sorted(OPTIONAL_PACKAGES.items()):
        for name in sorted(targets):
            if name in allowed:
                continue
            for member in sorted(closure(name, graph)):
                for dependency in targets[member]["dependencies"]:
                    kind, value = next(iter(dependency.items()))
                    if kind == "product" and value[1] == package:
                        via = "" if member == name else f" (through {member})"
                        failures.append(f"{name} must not depend on {package}'s {value[0]}{via}: only "
                                        + ", ".join(sorted(allowed)) + " may")
    return failures


def layering_failures(manifest, graph):
    """CrumbsPlatform at the bottom and internal; CrumbsSignalPath reached from Sources/ only
    through CrumbsRecorder."""
    failures = []
    for name, products in sorted(FORBIDDEN_PRODUCTS.items()):
        target = next((t for t in manifest["targets"] if t["name"] == name), None)
        if target is None:
            failures.append(f"{name}: no such target (rename it here too)")
            continue
        for dependency in target["dependencies"]:
            kind, value = next(iter(dependency.items()))
            if kind == "product" and value[0] in products:
                failures.append(f"{name} must not depend on the product {value[0]}")
    if graph.get("CrumbsPlatform", None) is None:
        return ["CrumbsPlatform: no such target"]
    if graph["CrumbsPlatform"]:
        failures.append("CrumbsPlatform must depend on none of our targets: " + ", ".join(graph["CrumbsPlatform"]))
    for product in manifest["products"]:
        if "CrumbsPlatform" in product["targets"]:
            failures.append(f"product {product['name']} names CrumbsPlatform, an internal target")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for target in manifest["targets"]:
        name = target["name"]
        if target["type"] != "regular" or target.get("path") or name == "CrumbsRecorder":
            continue  # tests, fuzzers and C targets live elsewhere; the recorder is the door
        if "CrumbsSignalPath" in graph[name]:
            failures.append(f"{name} depends on CrumbsSignalPath: only CrumbsRecorder may")
        folder = os.path.join(root, "Sources", name)
        for directory, _, files in os.walk(folder):
            for file in files:
                if not file.endswith(".swift"):
                    continue
                with open(os.path.join(directory, file)) as source:
                    if any(line.strip() == "import CrumbsSignalPath" for line in source):
                        failures.append(f"Sources/{name}/{file} imports CrumbsSignalPath: only CrumbsRecorder may")
    return failures


def main():
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as file:
            manifest = json.load(file)
    else:
        manifest = json.loads(subprocess.run(
            [os.environ.get("SWIFT", "swift"), "package", "dump-package"], check=True, capture_output=True, text=True).stdout)
    targets = {target["name"]: target for target in manifest["targets"]}
    graph = {name: dependencies(target, targets) for name, target in targets.items()}

    failures = []
    for name, forbidden in sorted(FORBIDDEN.items()):
        if name not in graph:
            failures.append(f"{name}: no such target (rename it here too)")
            continue
        for module, path in sorted(paths_to_forbidden(name, graph, forbidden).items()):
            failures.append(f"{name} must not depend on {module}: " + " → ".join(path))
    failures += layering_failures(manifest, graph)
    failures += optional_package_failures(targets, graph)
    for failure in failures:
        print("check-dependency-closure: " + failure, file=sys.stderr)
    if failures:
        return 1
    print(f"check-dependency-closure: {len(FORBIDDEN)} targets keep their arrows; CrumbsPlatform is internal"
          " and at the bottom; only CrumbsRecorder reaches CrumbsSignalPath; the collector parses no"
          " command line; only CrumbsMetrics links swift-metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
