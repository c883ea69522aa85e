#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests (Debian's `postgresql` package, installed by
# scripts/setup_test_deps.sh): initdb in DIR, listening only on a Unix socket in DIR (no TCP),
# trust authentication for the superuser `postgres`.
#   tests/pg_server.sh start DIR [PID]   creates DIR/data once, starts; prints the store's URI.
#                                   With PID: a watcher stops the server (immediate) once PID
#                                   is gone, so a test that crashes or times out leaves none.
#   tests/pg_server.sh stop DIR     stops (fast shutdown); DIR stays
#   tests/pg_server.sh kill DIR     stops at once (immediate shutdown, as a crash)
#   tests/pg_server.sh uri DIR      prints the URI
# Exit 77 (and a line naming scripts/setup_test_deps.sh) when no PostgreSQL server binaries are
# installed. initdb and postgres refuse to run as root: as root, they run as the `postgres`
# user (created by the Debian package) through runuser, in a DIR chowned to it (DIR's parents
# must let it through: mode o+x).
# STEPCAST_PG_BINDIR overrides where initdb and pg_ctl are looked for.
set -euo pipefail
action="${1:?usage: pg_server.sh start|stop|kill|uri DIR [PID]}"
dir="${2:?usage: pg_server.sh start|stop|kill|uri DIR [PID]}"
watch_pid="${3:-}"
dir="$(cd "$dir" && pwd)"
port=5432  # only names the socket file (DIR/.s.PGSQL.5432); no TCP listener

bindir="${STEPCAST_PG_BINDIR:-}"
if [ -z "$bindir" ]; then
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    bindir="$(pg_config --bindir)"
  else
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
      if [ -x "$d/initdb" ]; then bindir="$d"; break; fi
    done
  fi
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ] || [ ! -x "$bindir/pg_ctl" ]; then
  echo "pg_server.sh: no PostgreSQL server binaries (initdb, pg_ctl) found; run scripts/setup_test_deps.sh" >&2
  exit 77
fi

as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  if ! id postgres >/dev/null 2>&1; then
    echo "pg_server.sh: running as root and there is no 'postgres' user to run the server as" >&2
    exit 1
  fi
  chown postgres: "$dir"
  as_pg=(runuser -u postgres --)
fi

uri="postgresql://postgres@/postgres?host=$dir&port=$port"
case "$action" in
  uri) echo "$uri" ;;
  start)
    if [ ! -d "$dir/data" ]; then
      "${as_pg[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    "${as_pg[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-c listen_addresses='' -k $dir -p $port -c max_connections=${PG_MAX_CONNECTIONS:-100}" start \
      >"$dir/pg_ctl.log" 2>&1 || { cat "$dir/pg_ctl.log" "$dir/server.log" >&2; exit 1; }
    if [ -n "$watch_pid" ]; then
      # Detached from the caller's pipes; ends with the server or with PID.
      nohup setsid bash -c 'while kill -0 "$1" 2>/dev/null && [ -f "$2/data/postmaster.pid" ]; do sleep 1; done
        [ -f "$2/data/postmaster.pid" ] && "${@:4}" "$3/pg_ctl" -D "$2/data" -m immediate stop' \
        _ "$watch_pid" "$dir" "$bindir" "${as_pg[@]}" >/dev/null 2>&1 < /dev/null &
    fi
    echo "$uri"
    ;;
  stop) "${as_pg[@]}" "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null ;;
  kill) "${as_pg[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null ;;
  *) echo "pg_server.sh: unknown action '$action'" >&2; exit 2 ;;
esac
