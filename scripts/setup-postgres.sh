#!/usr/bin/env bash
# scripts/setup-postgres.sh — makes a PostgreSQL server answer on
# 127.0.0.1:5432 with the role "corral" (password "corral") owning the
# database "corral_test", for the store tests (CORRAL_TEST_POSTGRES_URL).
#
# Idempotent: a server that already lets corral into corral_test is left
# alone. As root it installs Debian's postgresql package when the server is
# missing, starts (or creates) a cluster, and creates the role and database.
# It prints errors and one status line, nothing else. Under CI=true every
# failure exits non-zero; elsewhere it warns and exits 0, and the PostgreSQL
# tests skip with the reason.
set -uo pipefail

host=127.0.0.1
port=5432
role=corral
password=corral
database=corral_test
logfile=/tmp/corral-setup-postgres.log

ci=${CI:-}
warn() { printf 'setup-postgres: %s\n' "$*" >&2; }
fail() {
  warn "$*"
  if [ "$ci" = true ]; then exit 1; fi
  exit 0
}
is_root() { [ "$(id -u)" = 0 ]; }

# corral_ready: the role can log in to the database over TCP with its password.
corral_ready() {
  command -v psql >/dev/null 2>&1 || return 1
  PGPASSWORD=$password PGCONNECT_TIMEOUT=3 psql -X -q -w -h "$host" -p "$port" -U "$role" -d "$database" \
    -tAc 'SELECT 1' >/dev/null 2>&1
}

# server_answers: something accepts connections on host:port.
server_answers() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$host" -p "$port" -t 2 >/dev/null 2>&1
  else
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
  fi
}

ready_line() {
  local version
  version=$(PGPASSWORD=$password psql -X -q -w -h "$host" -p "$port" -U "$role" -d "$database" \
    -tAc 'SHOW server_version' 2>/dev/null | awk '{print $1}')
  printf 'setup-postgres: PostgreSQL %s ready at %s:%s (database %s, role %s)\n' \
    "${version:-?}" "$host" "$port" "$database" "$role" >&2
}

if corral_ready; then
  ready_line
  exit 0
fi

is_root || fail "PostgreSQL with role $role and database $database does not answer on $host:$port, and not root: cannot set it up"

: >"$logfile"

# --- install ------------------------------------------------------------------
newest_version() {
  local newest
  newest=$(printf '%s\n' /usr/lib/postgresql/*/bin/postgres | sort -V | tail -n 1)
  [ -x "$newest" ] || return 1
  basename "$(dirname "$(dirname "$newest")")"
}

if ! newest_version >/dev/null || ! command -v psql >/dev/null 2>&1 || ! command -v pg_ctlcluster >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >>"$logfile" 2>&1 ||
    { tail -n 20 "$logfile" >&2; fail "apt-get update failed (log: $logfile)"; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >>"$logfile" 2>&1 ||
    { tail -n 20 "$logfile" >&2; fail "apt-get install postgresql failed (log: $logfile)"; }
fi
version=$(newest_version) || fail "postgresql is installed but no server binary was found under /usr/lib/postgresql"

# --- start --------------------------------------------------------------------
wait_for_server() {
  for _ in $(seq 1 60); do
    server_answers && return 0
    sleep 0.5
  done
  return 1
}

if ! server_answers; then
  # The cluster that Debian's package creates, or a new one if it is missing
  # (a package installed without its post-install step, a deleted cluster).
  if ! pg_lsclusters -h 2>/dev/null | awk -v v="$version" '$1 == v && $2 == "main" {found=1} END {exit !found}'; then
    pg_createcluster "$version" main -p "$port" >>"$logfile" 2>&1 ||
      { tail -n 20 "$logfile" >&2; fail "pg_createcluster $version main failed (log: $logfile)"; }
  fi
  # A cluster left over from a machine that stopped without a clean shutdown
  # keeps a postmaster.pid naming a process that is gone; pg_ctl handles that.
  pg_ctlcluster "$version" main start >>"$logfile" 2>&1 ||
    { tail -n 20 "$logfile" >&2; tail -n 20 "/var/log/postgresql/postgresql-$version-main.log" >&2 2>/dev/null
      fail "pg_ctlcluster $version main start failed (log: $logfile)"; }
  wait_for_server || fail "PostgreSQL $version did not answer on $host:$port within 30s (log: /var/log/postgresql/postgresql-$version-main.log)"
fi

# --- role and database ----------------------------------------------------------
# As the postgres superuser over the local socket (peer authentication).
as_postgres() {
  runuser -u postgres -- psql -X -q -w -p "$port" -v ON_ERROR_STOP=1 "$@" >>"$logfile" 2>&1
}
query_postgres() {
  runuser -u postgres -- psql -X -q -w -p "$port" -tAc "$1" 2>>"$logfile"
}

if [ "$(query_postgres "SELECT 1 FROM pg_roles WHERE rolname = '$role'")" != 1 ]; then
  as_postgres -c "CREATE ROLE $role LOGIN PASSWORD '$password'" ||
    { tail -n 5 "$logfile" >&2; fail "creating role $role failed (log: $logfile)"; }
else
  # The role may exist without a password or with another one.
  as_postgres -c "ALTER ROLE $role LOGIN PASSWORD '$password'" ||
    { tail -n 5 "$logfile" >&2; fail "setting the password of role $role failed (log: $logfile)"; }
fi
if [ "$(query_postgres "SELECT 1 FROM pg_database WHERE datname = '$database'")" != 1 ]; then
  as_postgres -c "CREATE DATABASE $database OWNER $role" ||
    { tail -n 5 "$logfile" >&2; fail "creating database $database failed (log: $logfile)"; }
fi

corral_ready || fail "PostgreSQL answers on $host:$port but role $role cannot log in to $database with its password (check pg_hba.conf; log: $logfile)"
ready_line
exit 0
