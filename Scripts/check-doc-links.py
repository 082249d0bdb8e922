#!/usr/bin/env python3
"""Every link to a document of this repository resolves.

Reads README.md, every Markdown file under docs/, Benchmarks/ and Fuzz/ (not build folders), and
every source file under Sources/ and Tests/, and checks each reference to a Markdown file of the
repository:
  - Markdown links `[text](path.md#anchor)` in Markdown files (relative to the file);
  - `docs/NAME.md#anchor` and `README.md#anchor` named in source comments (relative to the root).
The file must exist, and an anchor must be one that GitHub makes from a heading of that file
(lower case, punctuation but `-` and `_` dropped, spaces to `-`, repeats numbered `-1`, `-2`…).
Every page of docs/ must also be linked from README.md, whose index is the map of the docs.
Prints every broken reference as `file:line: target: why` and exits 1 when there is one.
Seconds, no build: `make test` runs it.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {".build", ".git", "corpus-work", "Corpus", "Regressions", "node_modules"}
SOURCE_SUFFIXES = (".swift", ".c", ".h", ".cpp", ".py", ".sh")

MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
SOURCE_REFERENCE = re.compile(r"\b((?:docs/)?[A-Za-z0-9_-]+\.md)(#[A-Za-z0-9_-]+)?")
FENCE = re.compile(r"^\s*(```|~~~)")


def walk(top, suffixes):
    for directory, folders, files in os.walk(top):
        folders[:] = sorted(f for f in folders if f not in SKIP_DIRS and not f.startswith(".build"))
        for name in sorted(files):
            if name.endswith(suffixes):
                yield os.path.join(directory, name)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = heading.replace("`", "").replace("*", "")
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, seen, fenced = set(), {}, False
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                match = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if match:
                    base = slug(match.group(1))
                    count = seen.get(base, 0)
                    seen[base] = count + 1
                    found.add(base if count == 0 else f"{base}-{count}")
                for explicit in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
                    found.add(explicit)
        _anchors[path] = found
    return _anchors[path]


def check(target, base_dir, origin, line_number, problems):
    path_part, _, anchor = target.partition("#")
    if re.match(r"^[a-z]+:", path_part):  # http:, https:, mailto:
        return
    if path_part == "":
        resolved = origin
    else:
        resolved = os.path.normpath(os.path.join(base_dir, path_part))
    relative_origin = os.path.relpath(origin, ROOT)
    if not os.path.exists(resolved):
        problems.append(f"{relative_origin}:{line_number}: {target}: no such file")
        return
    if anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
        problems.append(f"{relative_origin}:{line_number}: {target}: no heading makes this anchor")


def main():
    problems = []
    markdown = [os.path.join(ROOT, "README.md")]
    for top in ("docs", "Benchmarks", "Fuzz", "Examples"):
        if os.path.isdir(os.path.join(ROOT, top)):
            markdown.extend(walk(os.path.join(ROOT, top), (".md",)))
    for path in markdown:
        fenced = False
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                if fenced:
                    continue
                for target in MARKDOWN_LINK.findall(line):
                    target = target.strip("<>")
                    if target.startswith("#") or ".md" in target.split("#")[0] or "/" in target:
                        check(target, os.path.dirname(path), path, number, problems)
    for top in ("Sources", "Tests"):
        for path in walk(os.path.join(ROOT, top), SOURCE_SUFFIXES):
            with open(path, encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, 1):
                    for name, anchor in SOURCE_REFERENCE.findall(line):
                        if name.startswith("docs/") or name == "README.md":
                            check(name + anchor, ROOT, path, number, problems)
    # The README is the map: each page of docs/ has its line in its index.
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme_links = set(MARKDOWN_LINK.findall(handle.read()))
    for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
        if name.endswith(".md") and f"docs/{name}" not in readme_links:
            problems.append(f"README.md: docs/{name}: not in the documentation index")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-doc-links: {len(problems)} broken reference(s)", file=sys.stderr)
        return 1
    print(f"check-doc-links: every reference resolves ({len(markdown)} Markdown files, Sources and Tests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
