#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster for the tests; prints the URL. Idempotent, runs as root.
set -euo pipefail
PG_ROOT=${PG_ROOT:-/tmp/slm-pg}            # socket dir, data dir and log live here
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
# a cluster left from an earlier run: stop it (ignore failure), start from scratch
if [ -f "$PG_ROOT/data/postmaster.pid" ]; then
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -m immediate -w stop >/dev/null 2>&1 || true
fi
rm -rf "$PG_ROOT"
install -d -o postgres -g postgres -m 0700 "$PG_ROOT"
PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_ROOT/data" -U postgres --auth-local=trust \
  --auth-host=scram-sha-256 --no-sync --no-instructions -E UTF8 --locale=C.UTF-8 >"$PG_ROOT/initdb.log"
# settings in the cluster's own config, so a test's later `pg_ctl start`/`restart` keeps them
cat >>"$PG_ROOT/data/postgresql.conf" <<CONF
port = $PG_PORT
unix_socket_directories = '$PG_ROOT'
listen_addresses = '127.0.0.1'
fsync = off            # a test cluster: the OS crashing is not a case the tests make
CONF
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/server.log" -w -t 60 start >/dev/null
runuser -u postgres -- "$PG_BIN/psql" -h "$PG_ROOT" -p "$PG_PORT" -U postgres -qAt -c "CREATE DATABASE slm_test" >/dev/null
echo "SLM_TEST_PG_URL=postgresql://postgres@${PG_ROOT//\//%2F}:$PG_PORT/slm_test"
runuser -u postgres -- "$PG_BIN/psql" -h "$PG_ROOT" -p "$PG_PORT" -U postgres -qAt -c "ALTER ROLE postgres PASSWORD 'slm-test'" >/dev/null
echo "SLM_TEST_PG_TCP=postgresql://postgres:slm-test@127.0.0.1:$PG_PORT/slm_test"
echo "SLM_TEST_PG_CTL=$PG_BIN/pg_ctl -D $PG_ROOT/data -l $PG_ROOT/server.log -w"
