#!/usr/bin/env bash
# System parts the test suite uses, from Debian's packages: Chromium and its driver (the report
# is checked in a real headless browser). Installs what is missing when run as root with apt;
# otherwise says so and leaves the browser tests to skip with that reason.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "system-deps: missing ${need[*]} (install them from Debian's packages to run the browser tests)" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; }
echo "system-deps: installed ${need[*]}" >&2
