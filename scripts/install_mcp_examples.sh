#!/usr/bin/env bash
# Installs the npm MCP servers with apps that tests/ui/test_apps_npm.py runs, at the exact
# versions of tests/support/npm/package-lock.json (npm ci), into a cache folder outside the
# checkout: $MCP_EXAMPLES_DIR, else ${XDG_CACHE_HOME:-~/.cache}/chatmem/mcp-examples.  Does
# nothing when that folder already holds this lock's install.  Called by .ci/run and
# `make mcp-examples`; chatmem itself never needs Node.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
lock="$here/tests/support/npm/package-lock.json"
dir="${MCP_EXAMPLES_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/chatmem/mcp-examples}"
stamp="$dir/.lock-sha256"
want="$(sha256sum "$lock" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d "$dir/node_modules" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is not installed: the npm MCP example servers are not available" >&2
  exit 1
fi
mkdir -p "$dir"
cp "$here/tests/support/npm/package.json" "$lock" "$dir/"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
echo "$want" > "$stamp"
echo "MCP example servers installed in $dir"
