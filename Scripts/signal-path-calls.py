#!/usr/bin/env python3
"""The calls between the signal path's files: no circle, at most MAX_FLOORS floors.

Compiles every C and C++ file of Sources/CrumbsSignalPath on its own (clang -c, no
optimisation, so no call is inlined away) and reads each object's defined and undefined
symbols with nm. File A reaches file B when A uses a symbol of ours (crumbs…) that B defines;
a call to a libc name that one of our files stands in front of (sigaction, signal,
pthread_create: process/) is a call to libc, whichever definition the linker picks. Then:
  - a circle is a set of files that reach each other (a strongly connected component of more
    than one file): each is printed with its files, and is a breach;
  - the floors are the files of the longest chain of reaches (from set-up down to the kit),
    counted once the circles are folded: more than MAX_FLOORS is a breach.
`--report` prints the floors and each file's floor too. Exits 1 on a breach. Seconds.
"""

import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "Sources", "CrumbsSignalPath")
MAX_FLOORS = 10


def sources():
    for directory, folders, files in os.walk(TARGET):
        folders.sort()
        for name in sorted(files):
            if name.endswith((".c", ".cpp")):
                yield os.path.join(directory, name)


def compiler():
    swift = shutil.which("swift")
    if swift:
        clang = os.path.join(os.path.dirname(os.path.realpath(swift)), "clang")
        if os.access(clang, os.X_OK):
            return clang
    return shutil.which("clang") or "gcc"


def symbols(cc, path, work):
    name = os.path.relpath(path, TARGET).replace(os.sep, "_") + ".o"
    out = os.path.join(work, name)
    command = [cc, "-O0", "-c", path, "-o", out, "-I", TARGET, "-I", os.path.join(TARGET, "include")]
    if path.endswith(".cpp"):
        command[0] = cc + "++" if os.access(cc + "++", os.X_OK) else "clang++"
    subprocess.run(command, check=True)
    listing = subprocess.run(["nm", "-P", out], check=True, capture_output=True, text=True).stdout
    defined, used = set(), set()
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        symbol, kind = parts[0], parts[1]
        if kind == "U":
            used.add(symbol)
        elif kind in "TDBRVWtdbr" and kind.isupper():
            defined.add(symbol)
    return defined, used


def components(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on_stack, stack, result, counter = {}, {}, set(), [], [], [0]
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                result.append(sorted(component))
    return result


def main():
    report = "--report" in sys.argv
    cc = compiler()
    work = tempfile.mkdtemp(prefix="crumbs-calls-")
    try:
        files = {os.path.relpath(path, TARGET): symbols(cc, path, work) for path in sources()}
    finally:
        if work.startswith(tempfile.gettempdir()) and os.path.basename(work).startswith("crumbs-calls-"):
            shutil.rmtree(work)
    owner = {}
    for name, (defined, _) in files.items():
        for symbol in defined:
            owner[symbol] = name
    edges = {name: set() for name in files}
    for name, (_, used) in files.items():
        for symbol in used:
            callee = owner.get(symbol) if symbol.startswith("crumbs") else None
            if callee and callee != name:
                edges[name].add(callee)
    groups = components(sorted(files), edges)
    group_of = {member: i for i, group in enumerate(groups) for member in group}
    circles = [group for group in groups if len(group) > 1]
    # Floors: Tarjan emits components callees first, so one pass in emission order suffices.
    floor = {}
    for i, group in enumerate(groups):
        below = [floor[group_of[callee]] for member in group for callee in edges[member]
                 if group_of[callee] != i]
        floor[i] = 1 + max(below, default=0)
    floors = max(floor.values(), default=0)
    problems = []
    for group in circles:
        problems.append(f"a circle of {len(group)} files: {' ↔ '.join(group)}")
    if floors > MAX_FLOORS:
        problems.append(f"{floors} floors of calls (at most {MAX_FLOORS}): run with --report")
    if report:
        for name in sorted(files, key=lambda n: (-floor[group_of[n]], n)):
            print(f"{floor[group_of[name]]:3}  {name}  → {', '.join(sorted(edges[name])) or '-'}")
    for problem in problems:
        print(problem)
    summary = f"{len(files)} files, {floors} floors, {len(circles)} circle(s)"
    if problems:
        print(f"signal-path-calls: {summary}", file=sys.stderr)
        return 1
    print(f"signal-path-calls: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
