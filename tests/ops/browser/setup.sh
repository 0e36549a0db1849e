#!/usr/bin/env bash
# Installs what the dashboard's browser test needs from npm (playwright-core, pinned in
# package-lock.json) into tests/ops/browser/node_modules. Called by scripts/setup.sh.
# Idempotent: does nothing (no network) when the pinned version is installed. Chromium
# itself comes from Debian (/usr/bin/chromium), never from npm.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null; then
  echo "setup: npm is missing; the dashboard browser test will fail until it is installed" >&2
  exit 0
fi
want=$(sed -n 's/.*"playwright-core": *"\([^"]*\)".*/\1/p' package.json)
have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' node_modules/playwright-core/package.json \
         2>/dev/null | head -1 || true)
[ -n "$want" ] && [ "$want" = "$have" ] && exit 0
echo "setup: installing playwright-core $want from npm (tests/ops/browser)"
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: playwright-core downloads nothing anyway; be explicit.
if ! PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error; then
  echo "setup: npm ci failed; the dashboard browser test will fail until it succeeds" >&2
fi
