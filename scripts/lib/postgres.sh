# Shared by scripts/test: starts a throwaway PostgreSQL on a free 127.0.0.1 port for the SQL fencing
# example (examples/fenced-target), from the server binaries the machine has (Debian's postgresql).
# After start_postgres, $pg_url is its URL, or empty when the machine has no PostgreSQL (the test
# then skips, or fails under CI); stop_postgres (trap it) stops it and deletes its data.

pg_dir=""
pg_bin=""
pg_run=""

start_postgres() {
  pg_url=""
  local initdb
  initdb=$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | tail -n 1 || true)
  if [ -z "$initdb" ] || ! command -v psql >/dev/null; then
    log "no PostgreSQL server binaries or psql: the SQL fencing example's test will be skipped (fails under CI)"
    return 0
  fi
  pg_bin=$(dirname "$(readlink -f "$initdb")")
  pg_dir=$(mktemp -d)
  if [ "$(id -u)" -eq 0 ]; then
    # The server refuses to run as root: it runs as the postgres user Debian's package creates.
    if ! id postgres >/dev/null 2>&1; then
      log "running as root without a postgres user: the SQL fencing example's test will be skipped (fails under CI)"
      rm -rf "$pg_dir"; pg_dir=""
      return 0
    fi
    chown postgres "$pg_dir"
    pg_run="runuser -u postgres --"
  fi
  local port
  port=$(free_port)
  $pg_run "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U latestwins >"$pg_dir/initdb.log" 2>&1 ||
    { log "initdb failed:"; cat "$pg_dir/initdb.log" >&2; return 1; }
  $pg_run "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 30 \
    -o "-h 127.0.0.1 -p $port -k $pg_dir" start >/dev/null ||
    { log "PostgreSQL did not start:"; cat "$pg_dir/server.log" >&2; return 1; }
  pg_url="postgres://latestwins@127.0.0.1:$port/postgres?sslmode=disable"
  log "PostgreSQL on 127.0.0.1:$port"
}

stop_postgres() {
  if [ -n "$pg_dir" ]; then
    if [ -f "$pg_dir/data/postmaster.pid" ]; then
      $pg_run "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$pg_dir"
    pg_dir=""
  fi
}
