# Shared by scripts/test and scripts/bench: installs dynalite from the lockfile and starts it on a
# free loopback port. After start_dynalite, $endpoint is its URL; stop_dynalite (trap it) ends it.

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }

# install_dynalite installs dynalite as pinned by tools/dynalite/package-lock.json, again whenever
# the lockfile changes.
install_dynalite() {
  local stamp=tools/dynalite/node_modules/.lockfile-stamp
  if ! cmp -s tools/dynalite/package-lock.json "$stamp" 2>/dev/null; then
    log "installing dynalite from tools/dynalite/package-lock.json"
    npm ci --prefix tools/dynalite --no-audit --no-fund --loglevel=error >&2
    cp tools/dynalite/package-lock.json "$stamp"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

dynalite_pid=""

stop_dynalite() {
  if [ -n "$dynalite_pid" ]; then
    kill "$dynalite_pid" 2>/dev/null || true
    wait "$dynalite_pid" 2>/dev/null || true
    dynalite_pid=""
  fi
}

# start_dynalite starts dynalite on 127.0.0.1 (never every interface) on a free port, retrying on
# a clash, and waits until it answers.
start_dynalite() {
  endpoint=""
  local attempt port
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    node tools/dynalite/node_modules/dynalite/cli.js --host 127.0.0.1 --port "$port" \
      --createTableMs 0 --deleteTableMs 0 --updateTableMs 0 >/dev/null 2>&1 &
    dynalite_pid=$!
    for _ in $(seq 1 100); do
      if curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then
        endpoint="http://127.0.0.1:$port"
        break
      fi
      kill -0 "$dynalite_pid" 2>/dev/null || break
      sleep 0.05
    done
    [ -n "$endpoint" ] && break
    log "dynalite did not start on port $port (attempt $attempt); retrying"
    stop_dynalite
  done
  [ -n "$endpoint" ] || { log "could not start dynalite"; exit 1; }
  log "dynalite on $endpoint"
}
