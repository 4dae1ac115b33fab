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
USERS=${IANVS_DOCKER_USERS:-/run/ianvs-docker.users}
STOP_WHEN_IDLE=${IANVS_DOCKER_STOP_WHEN_IDLE:-/run/ianvs-docker.stop-when-idle}

answers() { docker -H "unix://$SOCK" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# `docker-engine.sh status`: exit 0 when the engine answers.
#
# Who stops it: whoever started it (.ci/run, or a test session that had to start it) asks for
# the stop with `docker-engine.sh stop`; other sessions may still use the engine then. Every
# session that uses the engine holds a shared `flock` on $USERS for as long as it does (the test
# helper tests/sandbox/docker_env.py takes it; the kernel drops it when the session dies, SIGKILL
# included). `stop` stops the daemon this script started (its pid file, waiting at most 30 s;
# images stay in the data root) only when no session holds that lock; otherwise it leaves the
# engine running and marks it ($STOP_WHEN_IDLE). `docker-engine.sh release`, run by every other
# session when it is done with the engine, stops it when it is so marked and nobody holds the
# lock any more: the last user out stops an engine that a session started, and an engine
# someone started by hand (no `stop` asked) keeps running.
stop_daemon() {
    if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
        pid=$(cat "$PIDFILE")
        kill -TERM "$pid"
        for _ in $(seq 1 150); do
            kill -0 "$pid" 2>/dev/null || { echo "docker-engine: stopped dockerd (pid $pid)" >&2; return 0; }
            sleep 0.2
        done
        echo "docker-engine: dockerd (pid $pid) did not stop within 30 s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
}
# run stop_daemon when no session holds $USERS (the exclusive lock is held while stopping, so
# a session starting meanwhile waits for its shared lock and then starts a fresh engine);
# exit 1 when a session holds it
stop_if_unused() {
    touch "$USERS"
    exec 8<"$USERS"
    flock -x -n 8 || { exec 8<&-; return 1; }
    stop_daemon
    rm -f "$STOP_WHEN_IDLE"
    exec 8<&-
}
case "${1:-start}" in
    status)
        command -v docker >/dev/null 2>&1 && [ -S "$SOCK" ] && answers
        exit $?
        ;;
    stop)
        # marked first: a user that releases between our look and our mark still sees it
        touch "$STOP_WHEN_IDLE"
        if ! stop_if_unused; then
            echo "docker-engine: another session still uses the engine; the last one to release it stops it" >&2
        fi
        exit 0
        ;;
    release)
        if [ -f "$STOP_WHEN_IDLE" ]; then
            stop_if_unused || true
        fi
        exit 0
        ;;
    start) ;;
    *) echo "usage: docker-engine.sh [start|status|stop|release]" >&2; exit 2 ;;
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
