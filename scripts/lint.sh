#!/usr/bin/env bash
# The format check CI runs first (a few seconds): every tracked C++ file (*.cc, *.h) must be
# as clang-format makes it under the root's .clang-format. Fails listing the files that are
# not. The .def tables (X-macro rows laid out by hand) are left out. The version counts:
# CI's is Debian's clang-format 14 (scripts/setup.sh); another may want other whitespace.
#   scripts/lint.sh          check
#   scripts/lint.sh --fix    format those files in place
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || bash scripts/setup.sh
mapfile -d '' files < <(git ls-files -z -- '*.cc' '*.h')
format=(clang-format --dry-run --Werror)
[ "${1:-}" = "--fix" ] && format=(clang-format -i)
if report=$(printf '%s\0' "${files[@]}" | xargs -0 -n 64 -P "$(nproc)" "${format[@]}" 2>&1); then
  echo "lint: ${#files[@]} C++ files clang-formatted"
  exit 0
fi
grep -o '^[^:]*:[0-9]*:[0-9]*: error: code should be clang-formatted' <<<"$report" |
  cut -d: -f1 | sort -u | sed 's/^/  /' >&2 || echo "$report" >&2
echo "lint: these files are not clang-formatted; scripts/lint.sh --fix formats them" >&2
exit 1
