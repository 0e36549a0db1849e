#!/usr/bin/env bash
# `atoll example NAME [ARGS]`: runs atoll-example-NAME on the cluster `atoll up` recorded,
# passing the example's own arguments through; an unknown NAME fails listing the examples.
source "$(dirname "$0")/lib.sh"
start_cluster

"$atoll" example mlp --steps 3 >"$work/out" 2>"$work/err" || { cat "$work/err"; fail "example mlp"; }
cat "$work/out"
# Nothing on stderr: it found the recorded cluster rather than starting one of its own.
[ ! -s "$work/err" ] || fail "stderr: $(cat "$work/err")"
[ "$(grep -c '^step   [1-3]/3  loss [0-9.]*  *[0-9]* examples/s$' "$work/out")" = 3 ] ||
  fail "expected 3 step lines"
grep -q '^done: loss ' "$work/out" || fail "no summary line"

! "$atoll" example no-such-example >"$work/out" 2>"$work/err" || fail "an unknown example ran"
grep -q "no example 'no-such-example' in .*(there: .*mlp.*pipeline" "$work/err" ||
  fail "unhelpful error: $(cat "$work/err")"
echo "PASS"
