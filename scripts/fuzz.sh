#!/usr/bin/env bash
# Fuzzes what atoll reads from outside: builds the libFuzzer harnesses of tests/fuzz with
# clang-14 into build-fuzz/ (only the libraries they need, every one instrumented with
# AddressSanitizer and UBSan; the gcc build in build/ is untouched), seeds each from real
# inputs (one encoded sample per message kind, tuple batches as an executor sends them,
# events, examples/*.toml, config/*.toml, checkpoint files) and runs each for SECONDS. Fails when any harness finds
# a crash, leak, undefined behaviour, hang or oversized allocation; the input that did is
# left in build-fuzz/findings/<harness>/ (replay: build-fuzz/fuzz/<harness>_fuzzer FILE).
#   scripts/fuzz.sh [SECONDS_PER_HARNESS]   (default 20: with the build, about 5 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
harnesses=(header message function tuples event job config checkpoint)
build_dir=build-fuzz

bash scripts/setup.sh
targets=(--target atoll-fuzz-seeds)
for h in "${harnesses[@]}"; do targets+=(--target "${h}_fuzzer"); done
ATOLL_BUILD_DIR=$build_dir bash scripts/build.sh -DCMAKE_CXX_COMPILER=clang++-14 \
  -DATOLL_FUZZ=ON -DATOLL_BUILD_TESTS=OFF -DATOLL_BUILD_BENCH=OFF "${targets[@]}"

seeds=$build_dir/seeds
rm -rf "$seeds" "$build_dir/findings"
"$build_dir/fuzz/atoll-fuzz-seeds" "$seeds"
mkdir -p "$seeds/job" "$seeds/config"
cp examples/*.toml "$seeds/job/"
cp config/*.toml tests/e2e/*.toml "$seeds/config/"

# Seed directories per harness: the header harness also gets the multi-frame batches.
declare -A extra_seeds=([header]="$seeds/tuples")
failed=()
for h in "${harnesses[@]}"; do
  corpus=$build_dir/corpus/$h  # what earlier runs found, kept between runs
  findings=$build_dir/findings/$h
  mkdir -p "$corpus" "$findings"
  # -timeout: one input running 10 s is a hang; -malloc_limit_mb: one allocation over
  # 256 MiB from a few KiB of input is a declared length trusted.
  # shellcheck disable=SC2086
  if "$build_dir/fuzz/${h}_fuzzer" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
      -artifact_prefix="$findings/" "$corpus" "$seeds/$h" ${extra_seeds[$h]:-} \
      >"$build_dir/$h.log" 2>&1; then
    echo "fuzz: $h: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$build_dir/$h.log" |
      grep -o '[0-9]*$') inputs in ${seconds} s, nothing found"
  else
    echo "fuzz: $h: FOUND A BUG; log $build_dir/$h.log, input in $findings/"
    grep -m5 -E 'ERROR|runtime error|SUMMARY' "$build_dir/$h.log" || tail -n 20 "$build_dir/$h.log"
    failed+=("$h")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}"
  exit 1
fi
