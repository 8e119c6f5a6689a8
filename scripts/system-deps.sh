#!/usr/bin/env bash
# Debian packages the full test suite needs (scripts/system-packages.txt, one per line), or
# the packages named as arguments (`make demo` asks for the sandbox's: bubblewrap strace).
# Idempotent: installs only what is missing. Services are started by the tests that need them.
set -euo pipefail
list="$(dirname "$0")/system-packages.txt"
wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
  while read -r pkg; do
    pkg="${pkg%%#*}"; pkg="${pkg// /}"
    [ -n "$pkg" ] && wanted+=("$pkg")
  done < "$list"
fi
needed=()
for pkg in "${wanted[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || needed+=("$pkg")
done
if [ ${#needed[@]} -gt 0 ] && [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${needed[*]} (not root: install them with" \
       "'sudo apt-get install ${needed[*]}')" >&2
  exit 1
fi
if [ ${#needed[@]} -gt 0 ]; then
  echo "installing Debian packages: ${needed[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${needed[@]}" >/dev/null
fi
