#!/usr/bin/env bash
# System parts the edge-dispatch tests use, from Debian's packages: iproute2 ('ip') for the
# network-namespace topology tests (cloud/edge1/edge2 joined by veth pairs). Idempotent and quick
# when present. Without root or apt it says so and those tests skip with that reason. 'tc netem'
# is not needed: where the kernel lacks it (as here) the tests delay the edge links with a TCP
# relay (core/edge/relay.py).
set -euo pipefail
command -v ip >/dev/null 2>&1 && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "edge-deps: missing iproute2 (install it to run the network-namespace edge tests)" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q iproute2 >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q iproute2 >/dev/null; }
echo "edge-deps: installed iproute2" >&2
