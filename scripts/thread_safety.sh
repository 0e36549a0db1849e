#!/usr/bin/env bash
# Clang's thread-safety analysis over the code that locks (common/base/thread_annotations.h):
# every source that uses a Mutex or the annotations, directly or through its own header,
# checked with clang-14 -fsyntax-only -Wthread-safety -Werror under the flags of a clang
# configuration in build-tsa/ (configured only, nothing is built). A field read without its
# GUARDED_BY lock, or a REQUIRES function called without it, fails the run. About a minute
# on 2 cores; CI runs it (.ci/run).
#   scripts/thread_safety.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${ATOLL_TSA_BUILD_DIR:-build-tsa}
command -v clang++-14 >/dev/null || bash scripts/setup.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DATOLL_UNITY_BUILD=OFF \
  -DATOLL_BUILD_TESTS=OFF -DATOLL_BUILD_BENCH=OFF -DATOLL_BUILD_PYTHON=OFF \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null

# The sources that lock: those naming the annotated types or macros, and the .cc beside a
# header that does.
mapfile -t sources < <(
  git ls-files -- '*.cc' '*.h' | grep -v '^common/base/\(mutex\|thread_annotations\)\.h$' |
    xargs grep -l -E '\b(Mutex|MutexLock|GUARDED_BY|REQUIRES|EXCLUDES)\b' |
    sed 's/\.h$/.cc/' | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)

# Each one's compile command from the configuration, compiling nothing: -fsyntax-only.
python3 - "$build_dir/compile_commands.json" "${sources[@]}" >"$build_dir/tsa_commands" <<'PY'
import json, os, shlex, sys
commands = {os.path.realpath(c["file"]): c for c in json.load(open(sys.argv[1]))}
for source in sys.argv[2:]:
    c = commands.get(os.path.realpath(source))
    if c is None:
        sys.exit(f"thread_safety: {source} is in no target of the clang configuration")
    args = shlex.split(c["command"])
    out = args.index("-o")
    del args[out:out + 2]
    args += ["-fsyntax-only", "-Wthread-safety", "-Werror"]
    print(shlex.quote(c["directory"]) + "\t" + shlex.join(args))
PY
failed=0
while IFS=$'\t' read -r dir command; do
  echo "cd $dir && $command"
done <"$build_dir/tsa_commands" | xargs -d '\n' -P "$(nproc)" -I{} bash -c '{}' || failed=1
if [ $failed -ne 0 ]; then
  echo "thread_safety: the analysis found locking the annotations do not allow (above)" >&2
  exit 1
fi
echo "thread_safety: ${#sources[@]} sources checked"
