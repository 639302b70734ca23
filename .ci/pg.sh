#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the team tests: prints the variables the tests read.
# `bash .ci/pg.sh` starts it (from scratch each time); `bash .ci/pg.sh stop` stops it.
# Root runs the server as the postgres user; anyone else runs it as themselves.
set -euo pipefail
PG_ROOT=${PG_ROOT:-/tmp/slm-pg}            # data, socket and log live here
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ -f "$PG_ROOT/data/postmaster.pid" ]; then
  as_owner "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -m immediate -w stop >/dev/null 2>&1 || true
fi
[ "${1:-start}" = stop ] && exit 0
rm -rf "$PG_ROOT"
if [ "$(id -u)" = 0 ]; then install -d -o postgres -g postgres -m 0700 "$PG_ROOT"; else install -d -m 0700 "$PG_ROOT"; fi
PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
SUPER=$([ "$(id -u)" = 0 ] && echo postgres || id -un)
as_owner "$PG_BIN/initdb" -D "$PG_ROOT/data" -U "$SUPER" --auth-local=trust --auth-host=scram-sha-256 \
  --no-sync --no-instructions -E UTF8 --locale=C.UTF-8 >"$PG_ROOT/initdb.log"
# in the cluster's own config, so that a test's `pg_ctl restart` keeps them
cat >>"$PG_ROOT/data/postgresql.conf" <<CONF
port = $PG_PORT
unix_socket_directories = '$PG_ROOT'
listen_addresses = '127.0.0.1'
fsync = off            # a test cluster: an OS crash is not a case the tests make
CONF
# -l: the server must not inherit this script's stdout (a caller reading it would wait forever)
as_owner "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/server.log" -w -t 60 start >/dev/null
as_owner "$PG_BIN/psql" -h "$PG_ROOT" -p "$PG_PORT" -U "$SUPER" -d postgres -qAt -c "CREATE DATABASE slm_test" >/dev/null
as_owner "$PG_BIN/psql" -h "$PG_ROOT" -p "$PG_PORT" -U "$SUPER" -d postgres -qAt -c "ALTER ROLE $SUPER PASSWORD 'slm-test'" >/dev/null
# the socket directory percent-encoded in the host part: no '&' for a shell to trip on
echo "SLM_TEST_PG_URL=postgresql://$SUPER@${PG_ROOT//\//%2F}:$PG_PORT/slm_test"
echo "SLM_TEST_PG_TCP=postgresql://$SUPER:slm-test@127.0.0.1:$PG_PORT/slm_test"
echo "SLM_TEST_PG_CTL='$PG_BIN/pg_ctl -D $PG_ROOT/data -l $PG_ROOT/server.log -w'"
