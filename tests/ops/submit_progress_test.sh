#!/usr/bin/env bash
# `atoll submit` of a multi-step job when stderr is not a terminal: plain progress lines
# (one per tenth of the steps) on stderr, results alone on stdout; --quiet prints none.
source "$(dirname "$0")/lib.sh"
start_cluster
job="$ATOLL_SOURCE_DIR/examples/spin.toml"

"$atoll" submit --steps 20 "$job" >"$work/out" 2>"$work/err" || { cat "$work/err"; fail "submit"; }
cat "$work/err"
[ "$(cat "$work/out")" = "y = f32[4] {1, 2, 3, 4}" ] || fail "stdout: $(cat "$work/out")"
! grep -q $'\r' "$work/err" || fail "carriage returns in non-terminal progress"
[ "$(grep -c '^spin: step [0-9]*/20 ([0-9.]* steps/s, ETA [0-9]*s)$' "$work/err")" = 9 ] ||
  fail "expected 9 progress lines with ETA"
grep -Eq '^spin: step 20/20 \([0-9.]+ steps/s, done in [0-9]+s\)$' "$work/err" ||
  fail "no final progress line"

"$atoll" submit --quiet --steps 3 "$job" >"$work/out" 2>"$work/err" || fail "submit --quiet"
[ ! -s "$work/err" ] || fail "--quiet printed: $(cat "$work/err")"

# A one-step job prints no progress at all.
"$atoll" submit --steps 1 "$job" >"$work/out" 2>"$work/err" || fail "submit --steps 1"
[ ! -s "$work/err" ] || fail "a one-step job printed progress: $(cat "$work/err")"
echo "PASS"
