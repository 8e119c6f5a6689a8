#!/usr/bin/env bash
# Debian packages the full test suite needs (scripts/system-packages.txt, one per line).
# Idempotent: installs only what is missing. Services are started by the tests that need them.
set -euo pipefail
list="$(dirname "$0")/system-packages.txt"
needed=()
while read -r pkg; do
  pkg="${pkg%%#*}"; pkg="${pkg// /}"
  [ -z "$pkg" ] && continue
  dpkg -s "$pkg" >/dev/null 2>&1 || needed+=("$pkg")
done < "$list"
if [ ${#needed[@]} -gt 0 ]; then
  echo "installing Debian packages: ${needed[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${needed[@]}" >/dev/null
fi
