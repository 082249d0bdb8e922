#!/usr/bin/env python3
"""The signal path's rooms keep their include directions.

Sources/CrumbsSignalPath is split into folders by world (docs/crash-capture.md):
  include/  what Swift imports: layouts, the append, public entry points
  kit/      pure async-signal-safe helpers
  ring/     the append and the ring header's words
  unwind/   unwinding, memory reads, modules and maps
  threads/  the thread capture (crash and live), /proc threads, thread dumps
  crash/    the handler, record writing, crash state, signal watch, termination message
  process/  set-up that is not signal-safe, or runs only in a child after fork

Rules (an include names the room of the header it reaches):
  - every C, C++ and header file of the target lives in one of the rooms;
  - include/ includes only include/;
  - kit/ includes only kit/ and include/;
  - ring/ includes none of crash/, threads/, unwind/, process/;
  - unwind/ includes none of threads/, crash/, process/;
  - threads/ includes none of crash/, process/;
  - crash/ includes nothing of process/;
  - nothing under Sources/ includes a testing header (`*_testing.h`): test hooks live in a
    test-only target;
  - every file outside include/ opens with a comment of at most 20 lines (the lines before the
    first `#` line: purpose, entry points in call order, signal safety and libc calls, a link to
    docs/crash-capture.md); the design lives in the doc, not in file headers;
  - no C or C++ file is longer than 600 lines.
Prints every breach as `file: why` and exits 1 when there is one. Seconds, no build.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "Sources", "CrumbsSignalPath")
ROOMS = ("include", "kit", "ring", "unwind", "threads", "crash", "process")
FORBIDDEN = {
    "include": {"kit", "ring", "unwind", "threads", "crash", "process"},
    "kit": {"ring", "unwind", "threads", "crash", "process"},
    "ring": {"crash", "threads", "unwind", "process"},
    "unwind": {"threads", "crash", "process"},
    "threads": {"crash", "process"},
    "crash": {"process"},
    "process": set(),
}
SUFFIXES = (".c", ".cpp", ".h")
MAX_HEADER_LINES = 20
MAX_FILE_LINES = 600
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def files_of(top):
    for directory, folders, files in os.walk(top):
        folders[:] = sorted(folders)
        for name in sorted(files):
            if name.endswith(SUFFIXES):
                yield os.path.join(directory, name)


def room_of(path):
    relative = os.path.relpath(path, TARGET).split(os.sep)
    return relative[0] if len(relative) > 1 and relative[0] in ROOMS else None


def header_lines(lines):
    """How many lines come before the first preprocessor line: the file's top comment."""
    for number, line in enumerate(lines):
        if line.lstrip().startswith("#"):
            return number
    return len(lines)


def size_problems(path, room, relative):
    with open(path, encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    problems = []
    header = header_lines(lines)
    if room != "include" and header > MAX_HEADER_LINES:
        problems.append(
            f"{relative}: top comment is {header} lines, at most {MAX_HEADER_LINES} "
            "(keep purpose, entry points, signal safety, libc calls and a link; "
            "move the design into docs/crash-capture.md)"
        )
    if not path.endswith(".h") and len(lines) > MAX_FILE_LINES:
        problems.append(
            f"{relative}: {len(lines)} lines, at most {MAX_FILE_LINES} for a C or C++ file "
            "(split it by what its parts do)"
        )
    return problems


def main():
    problems = []
    if not os.path.isdir(TARGET):
        print(f"check-signal-path-rooms: {TARGET} is missing", file=sys.stderr)
        return 1
    headers = {}
    for path in files_of(TARGET):
        if path.endswith(".h"):
            headers.setdefault(os.path.basename(path), []).append(path)
    for path in files_of(TARGET):
        relative = os.path.relpath(path, ROOT)
        room = room_of(path)
        if room is None:
            problems.append(f"{relative}: in no room (move it into one of {', '.join(ROOMS)})")
        problems.extend(size_problems(path, room, relative))
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                name = os.path.basename(match.group(1))
                if name.endswith("_testing.h"):
                    problems.append(f"{relative}:{number}: includes the testing header {name}")
                    continue
                found = headers.get(name)
                if not found or room is None:
                    continue
                if len(found) > 1:
                    problems.append(f"{relative}:{number}: {name} names {len(found)} headers")
                    continue
                reached = room_of(found[0])
                if reached in FORBIDDEN[room]:
                    problems.append(f"{relative}:{number}: {room}/ includes {reached}/{name}")
    for directory, _, files in os.walk(os.path.join(ROOT, "Sources")):
        if directory.startswith(TARGET):
            continue
        for name in files:
            if not name.endswith(SUFFIXES + (".swift",)):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, 1):
                    if re.search(r'#\s*include\s+[<"][^>"]*_testing\.h[>"]', line):
                        problems.append(f"{os.path.relpath(path, ROOT)}:{number}: includes a testing header")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-signal-path-rooms: {len(problems)} breach(es)", file=sys.stderr)
        return 1
    print(
        "check-signal-path-rooms: every file in its room, every include in its direction, "
        f"top comments of at most {MAX_HEADER_LINES} lines, no C file over {MAX_FILE_LINES} lines"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
