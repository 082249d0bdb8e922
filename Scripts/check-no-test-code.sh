#!/usr/bin/env bash
# check-no-test-code.sh BINARY — a product binary carries no test code: no symbol of it names
# testing (the signal path's test hooks and switches, the termination line's test pieces, the
# ring's white-box helpers all live in test-only targets; the product reaches the hooks only
# through kit/crumbs_hooks.h's table, NULL unless a test arms it). Run by `make test` on a
# release build of the `crumbs` CLI. Seconds.
set -euo pipefail
binary="${1:?usage: check-no-test-code.sh BINARY}"
[ -x "$binary" ] || { echo "check-no-test-code: $binary is not an executable" >&2; exit 1; }
found="$(nm "$binary" | awk '{ print $NF }' | grep -i 'testing' || true)"
if [ -n "$found" ]; then
  echo "$found" | sed 's/^/  /'
  echo "check-no-test-code: $(basename "$binary") carries $(echo "$found" | wc -l) testing symbol(s) (above)" >&2
  exit 1
fi
echo "check-no-test-code: $(basename "$binary") carries no testing symbol ($(nm "$binary" | wc -l) symbols)"
