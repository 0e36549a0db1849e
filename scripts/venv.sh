#!/usr/bin/env bash
# Makes the project's virtual environment .venv/ (or $ATOLL_VENV) from Debian's python3 and
# installs requirements.lock into it, every package at its pinned version and hash. Does
# nothing when the venv already holds this lock (a stamp in the venv records the lock's
# sha256). Called by scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${ATOLL_VENV:-.venv}
lock_sum=$(sha256sum requirements.lock | cut -d' ' -f1)
stamp="$venv/.atoll-requirements-lock"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$lock_sum" ]; then
  exit 0
fi
echo "setup: installing requirements.lock into $venv"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
# --no-deps: the lock already lists every package that any of them needs.
"$venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps \
  -r requirements.lock
echo "$lock_sum" >"$stamp"
