#!/usr/bin/env bash
# The Docker engine the `docker` sandbox backend and its tests use, from Debian's `docker.io`
# package. Idempotent and quick when the engine already answers.
#
# It runs a dockerd of the project's own (data root /var/lib/ianvs-docker, socket
# /run/ianvs-docker.sock) that never touches the host network: no bridge, no iptables rules, no
# IP forwarding or masquerading. Containers of the sandbox run with `--network none` anyway.
# Tests and the backend find it through the explicit socket path (sandbox option `docker_host`,
# default unix:///run/ianvs-docker.sock), never through a guessed DOCKER_HOST.
#
# Without root (or apt) it says so and exits 0: the Docker tests then skip with that reason.
# `runsc` (gVisor, Debian's package) is installed too and registered as a runtime, and
# `debootstrap`, which `ianvs sandbox image build` uses for the base image.
set -euo pipefail
SOCK=${IANVS_DOCKER_SOCK:-/run/ianvs-docker.sock}
ROOT=${IANVS_DOCKER_ROOT:-/var/lib/ianvs-docker}
EXEC_ROOT=${IANVS_DOCKER_EXEC_ROOT:-/run/ianvs-docker}
PIDFILE=${IANVS_DOCKER_PIDFILE:-/run/ianvs-docker.pid}
LOG=${IANVS_DOCKER_LOG:-/var/log/ianvs-dockerd.log}
CONFIG=${IANVS_DOCKER_CONFIG:-/etc/ianvs-docker/daemon.json}

answers() { docker -H "unix://$SOCK" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# `docker-engine.sh status`: exit 0 when the engine answers. `docker-engine.sh stop`: stop the
# daemon this script started (its pid file), waiting at most 30 s; images stay in the data root
# (the next start reuses them). Whoever starts the engine stops it: .ci/run does when it was the
# one that started it, and so does a test session that had to start it.
case "${1:-start}" in
    status)
        command -v docker >/dev/null 2>&1 && [ -S "$SOCK" ] && answers
        exit $?
        ;;
    stop)
        if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
            pid=$(cat "$PIDFILE")
            kill -TERM "$pid"
            for _ in $(seq 1 150); do
                kill -0 "$pid" 2>/dev/null || { echo "docker-engine: stopped dockerd (pid $pid)" >&2; exit 0; }
                sleep 0.2
            done
            echo "docker-engine: dockerd (pid $pid) did not stop within 30 s; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        exit 0
        ;;
    start) ;;
    *) echo "usage: docker-engine.sh [start|status|stop]" >&2; exit 2 ;;
esac

if command -v docker >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 && [ -S "$SOCK" ] \
        && answers; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "docker-engine: not root (or no apt): the docker backend tests will skip" >&2
    exit 0
fi
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v runsc >/dev/null 2>&1 || need+=(runsc)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)  # builds the base image
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; } \
        || { echo "docker-engine: could not install ${need[*]}: the docker backend tests will skip" >&2; exit 0; }
    echo "docker-engine: installed ${need[*]}" >&2
fi
# a stale pid file of a dead daemon would stop a new one from starting
if [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    rm -f "$PIDFILE" "$SOCK"
fi
if ! [ -f "$PIDFILE" ]; then
    mkdir -p "$ROOT" "$EXEC_ROOT"
    runtime=()
    if command -v runsc >/dev/null 2>&1; then
        # gVisor gets no network stack of its own (containers run with --network none anyway)
        mkdir -p "$(dirname "$CONFIG")"
        printf '{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=none", "--host-uds=open"]}}}\n' \
            "$(command -v runsc)" >"$CONFIG"
        runtime=(--config-file "$CONFIG")
    fi
    # setsid + nohup: the daemon outlives this script; `docker-engine.sh stop` ends it
    setsid nohup dockerd --host "unix://$SOCK" --data-root "$ROOT" --exec-root "$EXEC_ROOT" \
        --pidfile "$PIDFILE" --bridge=none --iptables=false --ip6tables=false --ip-forward=false \
        --ip-masq=false "${runtime[@]}" >>"$LOG" 2>&1 </dev/null &
fi
for _ in $(seq 1 150); do
    if answers; then
        echo "docker-engine: dockerd answers on unix://$SOCK" >&2
        exit 0
    fi
    sleep 0.2
done
echo "docker-engine: dockerd did not answer within 30 s (see $LOG): the docker backend tests will skip" >&2
tail -n 20 "$LOG" >&2 || true
exit 0
