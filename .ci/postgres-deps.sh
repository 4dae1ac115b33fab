#!/usr/bin/env bash
# The PostgreSQL service the repo task kind can start per run (issue 11 point 5): Debian's
# `postgresql` server binaries and an unprivileged system user `ianvs-postgres` that the server
# runs as (postgres refuses to run as root). Idempotent: exits at once when both are present.
# Without root or apt it says what is missing; the PostgreSQL tests then skip with that reason.
set -euo pipefail
have_bin() { compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; }
have_user() { id -u ianvs-postgres >/dev/null 2>&1; }
if have_bin && have_user; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "postgres-deps: need root to install postgresql and create the ianvs-postgres user" >&2
    exit 0
fi
if ! have_bin; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "postgres-deps: no apt-get; install PostgreSQL's server binaries by hand" >&2
        exit 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    # the package's own cluster is not wanted: the harness runs its own server per run
    mkdir -p /etc/postgresql-common
    if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
        echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
    fi
    apt-get install -y -q postgresql >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q postgresql >/dev/null; }
    echo "postgres-deps: installed postgresql" >&2
fi
if ! have_user; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin ianvs-postgres
    echo "postgres-deps: created system user ianvs-postgres" >&2
fi
