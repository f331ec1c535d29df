#!/usr/bin/env bash
# Rebuilds src/chatmem/web/static/vendor/ext-apps-app-bridge-<version>.js, the host side of
# MCP Apps (AppBridge and PostMessageTransport of @modelcontextprotocol/ext-apps), from the
# npm registry: the exact versions of scripts/app-bridge/package-lock.json (npm ci), bundled
# with esbuild into one script, its licences beside it.  Prints the hashes SOURCES.md records.
# Only this script needs Node; chatmem serves the file as it is, nothing is fetched at run time.
#
#   scripts/vendor_app_bridge.sh            # rebuild in place
#   scripts/vendor_app_bridge.sh --check    # rebuild in a scratch folder, fail if it differs
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
vendor="$here/../src/chatmem/web/static/vendor"
version="$(node -p 'require(process.argv[1]).dependencies["@modelcontextprotocol/ext-apps"]' "$here/app-bridge/package.json")"
name="ext-apps-app-bridge-$version"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/app-bridge/"{package.json,package-lock.json,entry.js,zod-locales.js,build.mjs} "$work/"
(cd "$work" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)

pinned() { node -p 'require(process.argv[1]).version' "$work/node_modules/$1/package.json"; }
banner="/*! @modelcontextprotocol/ext-apps $version app-bridge (AppBridge, PostMessageTransport)"
banner+=" with @modelcontextprotocol/client $(pinned @modelcontextprotocol/client),"
banner+=" @modelcontextprotocol/core $(pinned @modelcontextprotocol/core), zod $(pinned zod)."
banner+=" Licences: $name.LICENSE. Built by chatmem's scripts/vendor_app_bridge.sh. */"
(cd "$work" && node build.mjs "$work/$name.js" "$banner")

# One licence file for everything bundled: each package's own LICENSE under its name.
{
  for pkg in @modelcontextprotocol/ext-apps @modelcontextprotocol/client @modelcontextprotocol/core zod; do
    echo "==== $pkg $(pinned "$pkg") ($(node -p 'require(process.argv[1]).license' "$work/node_modules/$pkg/package.json")) ===="
    echo
    cat "$work/node_modules/$pkg/LICENSE"
    echo
  done
} > "$work/$name.LICENSE"

if [ "${1:-}" = "--check" ]; then
  cmp "$work/$name.js" "$vendor/$name.js" && cmp "$work/$name.LICENSE" "$vendor/$name.LICENSE"
  echo "$name.js is what the npm packages build"
else
  cp "$work/$name.js" "$work/$name.LICENSE" "$vendor/"
fi
echo "npm integrity: $(node -p 'require(process.argv[1]).packages["node_modules/@modelcontextprotocol/ext-apps"].integrity' "$work/package-lock.json")"
echo "sha384-$(openssl dgst -sha384 -binary "$work/$name.js" | openssl base64 -A)  $name.js"
sha256sum "$work/$name.js" | sed "s#$work/##"
