#!/usr/bin/env bash
# pip_install_test.sh SOURCE_DIR: the pip way, as a user takes it. Makes a new venv from
# Debian's python3, `pip install`s the checkout into it (scikit-build-core builds the
# wheel), and from that venv alone, in a directory with no source or build tree: checks
# that `atoll --version` and `atoll.__version__` agree and name the checkout's commit,
# starts a cluster with the installed `atoll up` (the config installed with it, ports made
# free), checks that every service that runs is the venv's binary, runs the paper's Figure 2
# from Python against numpy computing the same, and stops the cluster.
#
# The wheel is built in SOURCE_DIR/build-wheel with ccache and the flags of
# scripts/build.sh, so that where build/ was just built it compiles little.
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d /tmp/atoll-pip-XXXXXX)
venv=$work/venv
export ATOLL_HOME=$work/state
cleanup() {
  [ -x "$venv/bin/atoll" ] && "$venv/bin/atoll" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

/usr/bin/python3 -m venv "$venv"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1
fi
echo "== pip install $src"
start=$SECONDS
# Niced: the other tests beside it assert bounds in heartbeat periods.
nice -n 15 "$venv/bin/pip" install -q --disable-pip-version-check "$src" \
  --config-settings=build-dir=build-wheel --config-settings=cmake.define.ATOLL_WERROR=ON \
  "${launcher[@]}" >"$work/pip.log" 2>&1 || { tail -50 "$work/pip.log"; fail "pip install"; }
echo "installed in $((SECONDS - start)) s"

cd "$work"  # no config/, no build tree: only what the venv has
unset PYTHONPATH ATOLL_BIN_DIR ATOLL_PYTHON_DIR
for program in atoll atoll-rm atoll-scheduler atoll-executor atoll-objectstore atoll-simhosts; do
  [ -x "$venv/bin/$program" ] || fail "$program is not on the venv's PATH ($venv/bin)"
done
cli_version=$("$venv/bin/atoll" --version)
py_version=$("$venv/bin/python" -c 'import atoll; print(atoll.__version__)')
commit=$(git -C "$src" rev-parse --short=7 HEAD)
echo "atoll --version: $cli_version; atoll.__version__: $py_version; HEAD: $commit"
[ "$cli_version" = "atoll $py_version" ] || fail "the CLI and the package disagree"
[[ $py_version == *"+g$commit"* ]] || fail "the version does not name the commit $commit"

config=$venv/share/atoll/local.toml
[ -f "$config" ] || fail "the default config is not installed ($config)"
sed -E 's#(tcp://127\.0\.0\.1):555[0-9]#\1:*#' "$config" >"$work/free_ports.toml"
PATH=$venv/bin:$PATH atoll up --config "$work/free_ports.toml" >"$work/up.log" 2>&1 ||
  { cat "$work/up.log"; fail "atoll up"; }

"$venv/bin/python" - "$venv" "$ATOLL_HOME/cluster.toml" "$src/examples/python" <<'PY' ||
import os, sys, tomllib
import numpy as np

venv, record, examples = sys.argv[1:4]
import atoll
assert atoll.__file__.startswith(venv), f"atoll imported from {atoll.__file__}, not the venv"

# Every service the cluster runs is the venv's binary.
info = tomllib.load(open(record, "rb"))
processes = info["processes"] + [info["supervisor"]]
for p in processes:
    exe = os.readlink(f"/proc/{p['pid']}/exe")
    assert exe.startswith(venv + "/bin/"), f"{p['name']} runs {exe}, not a binary of {venv}"
programs = sorted({os.path.basename(os.readlink(f"/proc/{p['pid']}/exe")) for p in processes})
print(f"{len(processes)} processes, all from {venv}/bin: {', '.join(programs)}")

# Figure 2 from Python, against numpy computing the same.
sys.path.insert(0, examples)
from figure2 import figure2
v = np.random.default_rng().standard_normal(2).astype(np.float32)
with atoll.connect(name="pip-test") as client:
    y, z = client.run(figure2(client), v).result(timeout=60)
np.testing.assert_array_equal(y, v + np.float32(1))
np.testing.assert_array_equal(z, (v * np.float32(2) / np.float32(2)) * np.float32(2))
print(f"figure 2: v = {v}, y = {y}, z = {z}")
PY
  fail "the cluster from the venv"
"$venv/bin/atoll" down >/dev/null || fail "atoll down"
echo "PASS"
