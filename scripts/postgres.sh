#!/usr/bin/env bash
# scripts/postgres.sh: find or start a PostgreSQL server for Switchyard and export DATABASE_URL.
#
# Sourced by scripts/test.sh (`source scripts/postgres.sh`: a server's admin database, for tests)
# and scripts/run.sh (`source scripts/postgres.sh app`: the service's database), or run directly:
#
#   bash scripts/postgres.sh [start]   the service's database; prints `export DATABASE_URL=...`
#   bash scripts/postgres.sh url       the same, printing only the URL
#   bash scripts/postgres.sh admin-url the server's admin database `postgres` (what test.sh uses)
#   bash scripts/postgres.sh status    this checkout's database, and whether the private cluster runs
#   bash scripts/postgres.sh stop      stop the private cluster (its data is kept)
#   bash scripts/postgres.sh forget    forget this checkout's database; the next start chooses again
#   bash scripts/postgres.sh destroy   stop the private cluster and delete its data
#
# The server is the first of:
#   1. DATABASE_URL, if set: it must answer, or this fails (an explicit choice is never replaced).
#   2. The service's database only: the one recorded for this checkout in <repo>/.data/database.env
#      by the first start. It is used until `forget` (or `destroy` of the private cluster it
#      names); a recorded private cluster is started if stopped; a recorded server that does not
#      answer is an error, never a reason to move. bin/switchyard reads the same file.
#   3. $SWITCHYARD_PG_HOST:$SWITCHYARD_PG_PORT (default 127.0.0.1:5432) as user postgres, without
#      a password (or with PGPASSWORD), if it answers and accepts the login.
#   4. A private cluster under <repo>/.data/postgres (or $SWITCHYARD_PG_DIR): created with the
#      installed PostgreSQL binaries (PATH, then /usr/lib/postgresql/*/bin), trust authentication,
#      listening on 127.0.0.1 only, on the first free port from $SWITCHYARD_PG_PRIVATE_PORT
#      (default 55432). Run as root, it runs as the postgres OS user. A running one is reused.
#   5. If no PostgreSQL is installed: `apt-get install postgresql`, then 4.
# For the service's database, 3 and 4 use database `switchyard` (created if missing) and record
# the choice (a DATABASE_URL you set is never recorded).
#
# Exports DATABASE_URL (the service's database; for tests the server's `postgres` database, or
# DATABASE_URL as given), SWITCHYARD_PG_ADMIN_URL (the same server's `postgres` database),
# SWITCHYARD_PG_SOURCE (env, local or private) and SWITCHYARD_PG_STARTED (1 when this call started
# the private cluster, else 0). With SWITCHYARD_PG_FAST=1 a private cluster it starts runs without
# fsync (for tests: fast, not crash-safe). Messages go to stderr; when a server turns a connection
# away they quote its reason. Needs bash 4.1 or later.

_sypg_log() { printf 'postgres.sh: %s\n' "$*" >&2; }

_sypg_repo() { (cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd); }

# _sypg_redact URL: the URL with any password replaced.
_sypg_redact() { printf '%s' "$1" | sed -E 's#(://[^:/@]*):[^@/]*@#\1:xxxxx@#'; }

# _sypg_with_db URL DB: the URL with its database replaced by DB (URL form only).
_sypg_with_db() {
  printf '%s' "$1" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?(\\?.*)?\$#\\1/$2\\4#"
}

_sypg_is_root() { [ "$(id -u)" = 0 ]; }

# _sypg_server_bindir: the directory holding initdb, pg_ctl and postgres of one installation.
_sypg_server_bindir() {
  local initdb dir
  if initdb=$(command -v initdb 2>/dev/null); then
    dir=$(dirname "$(readlink -f "$initdb")")
    if [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
      printf '%s' "$dir"
      return 0
    fi
  fi
  # SWITCHYARD_PG_LIBDIR exists for testing this script's install path.
  dir=$(for d in "${SWITCHYARD_PG_LIBDIR:-/usr/lib/postgresql}"/*/bin; do [ -d "$d" ] && printf '%s\n' "$d"; done | sort -V | tail -n 1)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
    printf '%s' "$dir"
    return 0
  fi
  return 1
}

# _sypg_client NAME: path of a client program (psql, pg_isready).
_sypg_client() {
  local dir
  if command -v "$1" >/dev/null 2>&1; then
    command -v "$1"
    return 0
  fi
  if dir=$(_sypg_server_bindir) && [ -x "$dir/$1" ]; then
    printf '%s' "$dir/$1"
    return 0
  fi
  return 1
}

# _sypg_apt_install PACKAGE...: install Debian packages when that is possible without a prompt.
_sypg_apt_install() {
  local sudo=()
  if ! command -v apt-get >/dev/null 2>&1; then
    _sypg_log "cannot install $* automatically (no apt-get); install PostgreSQL and run again"
    return 1
  fi
  if ! _sypg_is_root; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      _sypg_log "installing $* needs root; run: sudo apt-get install -y $*"
      return 1
    fi
  fi
  _sypg_log "installing $* with apt-get (this takes a minute)"
  if [ -z "${_SYPG_APT_UPDATED:-}" ]; then
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >&2 || return 1
    _SYPG_APT_UPDATED=1
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" </dev/null >&2
}

# _sypg_need_clients: make sure psql and pg_isready exist.
_sypg_need_clients() {
  if _sypg_client psql >/dev/null && _sypg_client pg_isready >/dev/null; then
    return 0
  fi
  _sypg_apt_install postgresql-client || return 1
  _sypg_client psql >/dev/null && _sypg_client pg_isready >/dev/null
}

# _sypg_answers URL: the server at URL accepts connections (says nothing about the login).
_sypg_answers() {
  PGCONNECT_TIMEOUT=5 "$(_sypg_client pg_isready)" -q -t 5 -d "$1" >/dev/null 2>&1
}

# _sypg_login URL: a query succeeds at URL without prompting for a password.
_sypg_login() {
  PGCONNECT_TIMEOUT=5 "$(_sypg_client psql)" -w -X -A -t -q -d "$1" -c 'select 1' </dev/null >/dev/null 2>&1
}

# _sypg_as_pg CMD...: run a command as the postgres OS user when root, else as ourselves, from /
# so that an unreadable working directory does not trouble it.
_sypg_as_pg() {
  if _sypg_is_root; then
    if command -v runuser >/dev/null 2>&1; then
      (cd / && runuser -u postgres -- "$@")
    else
      (cd / && su -s /bin/sh postgres -c "$(printf '%q ' "$@")")
    fi
  else
    (cd / && "$@")
  fi
}

_sypg_primary_dir() { printf '%s' "${SWITCHYARD_PG_DIR:-$(_sypg_repo)/.data/postgres}"; }

# Used as root when the postgres user cannot reach the repository (for example under /root).
_sypg_fallback_dir() {
  printf '/var/tmp/switchyard-postgres-%s' "$(_sypg_repo | cksum | cut -d' ' -f1)"
}

# _sypg_existing_dir: the private cluster's directory, if one was created.
_sypg_existing_dir() {
  local d
  for d in "$(_sypg_primary_dir)" "$(_sypg_fallback_dir)"; do
    if [ -f "$d/data/PG_VERSION" ]; then
      printf '%s' "$d"
      return 0
    fi
  done
  return 1
}

# _sypg_running DIR: the cluster in DIR runs; prints its port.
_sypg_running() {
  local bindir="$2" port
  [ -f "$1/data/postmaster.pid" ] || return 1
  _sypg_as_pg "$bindir/pg_ctl" -D "$1/data" status >/dev/null 2>&1 || return 1
  port=$(sed -n 4p "$1/data/postmaster.pid")
  [ -n "$port" ] || return 1
  printf '%s' "$port"
}

# _sypg_port_free PORT: nothing listens on 127.0.0.1:PORT.
_sypg_port_free() {
  ! timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

_sypg_private_url() { printf 'postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable' "$1"; }

# _sypg_make_dir DIR: create DIR for the cluster, owned by the user that runs it.
_sypg_make_dir() {
  mkdir -p "$1" || return 1
  if _sypg_is_root; then
    if ! id postgres >/dev/null 2>&1; then
      _sypg_log "creating the postgres OS user to run the private cluster"
      useradd --system --no-create-home --home-dir /var/lib/postgresql --shell /bin/sh postgres || return 1
    fi
    chown postgres: "$1" || return 1
    _sypg_as_pg test -w "$1" 2>/dev/null || return 1
  fi
  chmod 0700 "$1"
}

# _sypg_start_private: create or reuse the private cluster; sets _SYPG_PORT to its port and
# SWITCHYARD_PG_STARTED=1 when it started it. Runs in the caller's shell (not $(...)).
_sypg_start_private() {
  local bindir dir data port lockfd="" candidate first opts rc=0
  if ! bindir=$(_sypg_server_bindir); then
    _sypg_apt_install postgresql || return 1
    bindir=$(_sypg_server_bindir) || { _sypg_log "PostgreSQL server binaries not found after installing"; return 1; }
  fi
  if ! dir=$(_sypg_existing_dir); then
    dir=$(_sypg_primary_dir)
    if ! _sypg_make_dir "$dir"; then
      if [ -n "${SWITCHYARD_PG_DIR:-}" ] || ! _sypg_is_root; then
        _sypg_log "cannot prepare $dir for the private cluster"
        return 1
      fi
      rmdir "$dir" 2>/dev/null
      dir=$(_sypg_fallback_dir)
      _sypg_log "the postgres user cannot reach $(_sypg_primary_dir); using $dir"
      _sypg_make_dir "$dir" || { _sypg_log "cannot prepare $dir for the private cluster"; return 1; }
    fi
  fi
  data="$dir/data"

  # One starter at a time (run.sh and test.sh may start together).
  exec {lockfd}>>"$dir/.lock" || return 1
  if command -v flock >/dev/null 2>&1; then
    flock -w 120 "$lockfd" || _sypg_log "waiting for the lock on $dir/.lock timed out; going on"
  fi

  if port=$(_sypg_running "$dir" "$bindir"); then
    _sypg_log "reusing the private cluster in $dir on port $port"
  else
    if [ ! -f "$data/PG_VERSION" ]; then
      _sypg_log "creating a private PostgreSQL cluster in $dir ($("$bindir/postgres" --version))"
      if [ -n "$(ls -A "$data" 2>/dev/null)" ]; then
        _sypg_log "$data exists but holds no PostgreSQL cluster; move it away or set SWITCHYARD_PG_DIR"
        rc=1
      elif ! _sypg_as_pg "$bindir/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
        _sypg_log "initdb failed; see $dir/initdb.log:"
        tail -n 20 "$dir/initdb.log" >&2
        rc=1
      else
        # TCP on loopback only; no Unix socket (its path would depend on the repository's).
        printf '%s\n' "listen_addresses = '127.0.0.1'" "unix_socket_directories = ''" \
          "max_connections = 300" "log_min_messages = warning" >>"$data/postgresql.conf"
      fi
    fi
    if [ "$rc" = 0 ]; then
      first=${SWITCHYARD_PG_PRIVATE_PORT:-55432}
      port=""
      for candidate in $(cat "$dir/port" 2>/dev/null) $(seq "$first" $((first + 100))); do
        if _sypg_port_free "$candidate"; then
          port=$candidate
          break
        fi
      done
      if [ -z "$port" ]; then
        _sypg_log "no free port from $first to $((first + 100))"
        rc=1
      fi
    fi
    if [ "$rc" = 0 ]; then
      opts="-p $port"
      if [ "${SWITCHYARD_PG_FAST:-0}" = 1 ]; then
        opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
      fi
      _sypg_log "starting the private cluster on 127.0.0.1:$port (log: $dir/postgres.log)"
      # The server must not inherit the lock's descriptor, or it would hold the lock for life.
      if _sypg_as_pg "$bindir/pg_ctl" -D "$data" -l "$dir/postgres.log" -w -t 60 -o "$opts" start \
        >/dev/null {lockfd}>&-; then
        printf '%s\n' "$port" >"$dir/port"
        SWITCHYARD_PG_STARTED=1
      else
        _sypg_log "the private cluster did not start; last lines of $dir/postgres.log:"
        tail -n 20 "$dir/postgres.log" >&2 2>/dev/null
        rc=1
      fi
    fi
  fi
  exec {lockfd}>&-
  [ "$rc" = 0 ] || return 1
  _SYPG_PORT=$port
}

# _sypg_login_error URL: why a query at URL fails, in the server's words ("FATAL: sorry, too
# many clients already"), without psql's "connection to server ... failed:" preamble.
_sypg_login_error() {
  local out
  out=$(PGCONNECT_TIMEOUT=5 "$(_sypg_client psql)" -w -X -A -t -q -d "$1" -c 'select 1' </dev/null 2>&1 >/dev/null)
  out=$(printf '%s' "$out" | grep -v '^[[:space:]]*$' | head -n 1 | sed -E 's/^psql: (error: )?//; s/.* failed: //; s/[[:space:]]+/ /g')
  printf '%s' "${out:-no answer to a query}"
}

# _sypg_refused_login CAUSE: the cause is the login itself (no password, wrong password, no such
# role, pg_hba.conf), not a passing state of the server such as "too many clients".
_sypg_refused_login() {
  printf '%s' "$1" | grep -qiE 'password|authentication|pg_hba\.conf|role .* does not exist|fe_sendauth'
}

# _sypg_pick MODE: the first of 127.0.0.1:5432 and the private cluster (steps 2 to 4 at the top);
# sets DATABASE_URL to its admin database and SWITCHYARD_PG_SOURCE. MODE app refuses, rather than
# passes over, a server at 5432 that answers but turns the connection away for a passing reason
# ("too many clients"), since the choice is recorded for good.
_sypg_pick() {
  local mode=$1 host="${SWITCHYARD_PG_HOST:-127.0.0.1}" port="${SWITCHYARD_PG_PORT:-5432}" url cause
  url="postgres://postgres@$host:$port/postgres?sslmode=disable"
  # Without client programs, install them only if something listens there at all.
  if ! _sypg_client pg_isready >/dev/null || ! _sypg_client psql >/dev/null; then
    if timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; then
      _sypg_need_clients || true
    fi
  fi
  if _sypg_client pg_isready >/dev/null && _sypg_client psql >/dev/null && _sypg_answers "$url"; then
    if _sypg_login "$url"; then
      SWITCHYARD_PG_SOURCE=local
      DATABASE_URL=$url
      return 0
    fi
    cause=$(_sypg_login_error "$url")
    if _sypg_refused_login "$cause"; then
      _sypg_log "the server at $host:$port refuses user postgres without a password ($cause); using a private cluster"
    elif [ "$mode" = app ]; then
      _sypg_log "the server at $host:$port answers but turned the connection away: $cause"
      _sypg_log "try again when it accepts connections, or set DATABASE_URL to the database to use"
      return 1
    else
      _sypg_log "the server at $host:$port answers but turned the connection away ($cause); using a private cluster"
    fi
  else
    _sypg_log "no PostgreSQL answers at $host:$port; using a private cluster"
  fi
  _sypg_use_private
}

# _sypg_use_private: start or reuse the private cluster; DATABASE_URL is its admin database.
_sypg_use_private() {
  _sypg_start_private || return 1
  SWITCHYARD_PG_SOURCE=private
  DATABASE_URL=$(_sypg_private_url "$_SYPG_PORT")
  _sypg_need_clients || return 1
  if ! _sypg_login "$DATABASE_URL"; then
    _sypg_log "the private cluster on port $_SYPG_PORT does not accept connections: $(_sypg_login_error "$DATABASE_URL")"
    return 1
  fi
}

# _sypg_use_env: check the DATABASE_URL the user set; SWITCHYARD_PG_ADMIN_URL is its server's
# postgres database.
_sypg_use_env() {
  _sypg_need_clients || { _sypg_log "psql and pg_isready are needed to check DATABASE_URL"; return 1; }
  if ! _sypg_answers "$DATABASE_URL"; then
    _sypg_log "DATABASE_URL is set ($(_sypg_redact "$DATABASE_URL")) but no server answers there; start it, or unset DATABASE_URL to use a local or private server"
    return 1
  fi
  SWITCHYARD_PG_SOURCE="env"
  case "$DATABASE_URL" in
    postgres://* | postgresql://*) SWITCHYARD_PG_ADMIN_URL=$(_sypg_with_db "$DATABASE_URL" postgres) ;;
    *) SWITCHYARD_PG_ADMIN_URL=$DATABASE_URL ;;
  esac
  if ! _sypg_login "$DATABASE_URL"; then
    # The database itself may not exist yet (run.sh creates it): the same login on the
    # server's `postgres` database is enough.
    if [ "$SWITCHYARD_PG_ADMIN_URL" = "$DATABASE_URL" ] || ! _sypg_login "$SWITCHYARD_PG_ADMIN_URL"; then
      _sypg_log "the server at DATABASE_URL ($(_sypg_redact "$DATABASE_URL")) answers but refuses the connection: $(_sypg_login_error "$DATABASE_URL")"
      return 1
    fi
    _sypg_log "the database in DATABASE_URL does not exist yet (or refuses this user); the server accepts the login"
  fi
}

# sypg_ensure: choose the server as described at the top (for tests: the admin database), and
# export the variables.
sypg_ensure() {
  SWITCHYARD_PG_STARTED=0
  if [ -n "${DATABASE_URL:-}" ]; then
    _sypg_use_env || return 1
  else
    _sypg_pick admin || return 1
    SWITCHYARD_PG_ADMIN_URL=$DATABASE_URL
  fi
  export DATABASE_URL SWITCHYARD_PG_ADMIN_URL SWITCHYARD_PG_SOURCE SWITCHYARD_PG_STARTED
  _sypg_log "using PostgreSQL ($SWITCHYARD_PG_SOURCE): $(_sypg_redact "$DATABASE_URL")"
}

# The checkout's database, recorded by the first start so that every later start and the CLI
# (config.RecordedDatabase reads the same file) use it until the user says otherwise.
_sypg_record_file() { printf '%s' "$(_sypg_repo)/.data/database.env"; }

# _sypg_record_read: sets _SYPG_REC_URL and _SYPG_REC_SOURCE from the record; fails without one.
_sypg_record_read() {
  local f
  f=$(_sypg_record_file)
  [ -f "$f" ] || return 1
  _SYPG_REC_URL=$(sed -n 's/^DATABASE_URL=//p' "$f" | head -n 1)
  _SYPG_REC_SOURCE=$(sed -n 's/^SOURCE=//p' "$f" | head -n 1)
  [ -n "$_SYPG_REC_URL" ]
}

# _sypg_record_write URL SOURCE
_sypg_record_write() {
  local f tmp
  f=$(_sypg_record_file)
  mkdir -p "$(dirname "$f")" || return 1
  tmp="$f.tmp.$$"
  (
    umask 077
    printf '%s\n' \
      "# This checkout's database, recorded by scripts/postgres.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)." \
      "# scripts/run.sh and bin/switchyard use it when DATABASE_URL is not set." \
      "# To choose again: bash scripts/postgres.sh forget (the data stays where it is)." \
      "DATABASE_URL=$1" "SOURCE=$2" >"$tmp"
  ) && mv -f "$tmp" "$f"
}

# _sypg_create_db ADMIN_URL APP_URL: create the database APP_URL names if it does not exist.
_sypg_create_db() {
  local db exists psql_bin
  case "$2" in
    postgres://* | postgresql://*) db=$(printf '%s' "$2" | sed -E 's#^[a-z]+://[^/?]*/?([^?]*).*$#\1#') ;;
    *) return 0 ;; # a key=value string: the database must exist already
  esac
  [ -n "$db" ] || return 0
  psql_bin=$(_sypg_client psql)
  exists=$(printf '%s\n' "select 1 from pg_database where datname = :'db';" |
    "$psql_bin" -w -X -A -t -q -v ON_ERROR_STOP=1 -v db="$db" -d "$1" -f - 2>&1) || {
    _sypg_log "cannot query the databases of the server at $(_sypg_redact "$1"): $exists"
    return 1
  }
  [ "$exists" = 1 ] && return 0
  _sypg_log "creating database $db"
  printf '%s\n' 'create database :"db";' |
    "$psql_bin" -w -X -q -v ON_ERROR_STOP=1 -v db="$db" -d "$1" -f - || {
    _sypg_log "could not create database $db; create it, or set DATABASE_URL to an existing database"
    return 1
  }
}

# sypg_ensure_app: the service's database (what scripts/run.sh and `url` use), the first of:
# DATABASE_URL if set (not recorded); the checkout's recorded database; else the server chosen as
# at the top, database `switchyard`, which is then recorded. The database is created if missing.
# Exports DATABASE_URL (the service's database) and the variables sypg_ensure exports.
sypg_ensure_app() {
  local app_url port
  SWITCHYARD_PG_STARTED=0
  if [ -n "${DATABASE_URL:-}" ]; then
    if _sypg_record_read; then
      _sypg_log "DATABASE_URL is set: using it for this run, not this checkout's recorded database ($(_sypg_redact "$_SYPG_REC_URL"), in $(_sypg_record_file))"
    fi
    _sypg_use_env || return 1
    app_url=$DATABASE_URL
  elif _sypg_record_read; then
    case "$_SYPG_REC_SOURCE" in
      private)
        _sypg_log "this checkout's database is the private cluster (recorded in $(_sypg_record_file))"
        if ! _sypg_existing_dir >/dev/null; then
          _sypg_log "WARNING: the private cluster recorded for this checkout is gone; creating a new, empty one"
        fi
        _sypg_use_private || return 1
        SWITCHYARD_PG_ADMIN_URL=$DATABASE_URL
        app_url=$(_sypg_with_db "$DATABASE_URL" "$(printf '%s' "$_SYPG_REC_URL" | sed -E 's#^[a-z]+://[^/?]*/?([^?]*).*$#\1#')")
        # The cluster may have moved to another port (the recorded one was taken).
        [ "$app_url" = "$_SYPG_REC_URL" ] || _sypg_record_write "$app_url" private || return 1
        ;;
      *)
        SWITCHYARD_PG_SOURCE=local
        SWITCHYARD_PG_ADMIN_URL=$(_sypg_with_db "$_SYPG_REC_URL" postgres)
        app_url=$_SYPG_REC_URL
        _sypg_need_clients || return 1
        if ! _sypg_answers "$SWITCHYARD_PG_ADMIN_URL" || ! _sypg_login "$SWITCHYARD_PG_ADMIN_URL"; then
          _sypg_log "this checkout's database is $(_sypg_redact "$app_url") (recorded in $(_sypg_record_file)), but that server does not take the connection: $(_sypg_login_error "$SWITCHYARD_PG_ADMIN_URL")"
          _sypg_log "start that server; or set DATABASE_URL for one run; or run 'bash scripts/postgres.sh forget' to choose a server again (the data there stays)"
          return 1
        fi
        ;;
    esac
  else
    _sypg_pick app || return 1
    SWITCHYARD_PG_ADMIN_URL=$DATABASE_URL
    app_url=$(_sypg_with_db "$DATABASE_URL" switchyard)
    _sypg_record_write "$app_url" "$SWITCHYARD_PG_SOURCE" || return 1
    _sypg_log "recorded $(_sypg_redact "$app_url") as this checkout's database in $(_sypg_record_file): later starts and bin/switchyard use it"
  fi
  _sypg_create_db "$SWITCHYARD_PG_ADMIN_URL" "$app_url" || return 1
  DATABASE_URL=$app_url
  export DATABASE_URL SWITCHYARD_PG_ADMIN_URL SWITCHYARD_PG_SOURCE SWITCHYARD_PG_STARTED
  _sypg_log "using PostgreSQL ($SWITCHYARD_PG_SOURCE): $(_sypg_redact "$DATABASE_URL")"
}

# sypg_forget: delete the record of the checkout's database (the database itself is kept).
sypg_forget() {
  local f
  f=$(_sypg_record_file)
  if ! _sypg_record_read; then
    _sypg_log "no database is recorded for this checkout"
    return 0
  fi
  rm -f "$f" || return 1
  _sypg_log "forgot $(_sypg_redact "$_SYPG_REC_URL") ($_SYPG_REC_SOURCE); its data is kept. The next start chooses a server again."
}

# sypg_stop: stop the private cluster, if it runs.
sypg_stop() {
  local dir bindir
  if ! dir=$(_sypg_existing_dir); then
    _sypg_log "no private cluster exists"
    return 0
  fi
  bindir=$(_sypg_server_bindir) || { _sypg_log "PostgreSQL binaries not found"; return 1; }
  if ! _sypg_running "$dir" "$bindir" >/dev/null; then
    _sypg_log "the private cluster in $dir is not running"
    return 0
  fi
  _sypg_log "stopping the private cluster in $dir"
  _sypg_as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
}

sypg_status() {
  local dir bindir port rc=3
  if _sypg_record_read; then
    echo "this checkout's database: $(_sypg_redact "$_SYPG_REC_URL") ($_SYPG_REC_SOURCE; recorded in $(_sypg_record_file))"
  else
    echo "this checkout's database: none recorded yet (the first start of scripts/run.sh chooses one)"
  fi
  if ! dir=$(_sypg_existing_dir); then
    echo "private cluster: not created (would be $(_sypg_primary_dir))"
  elif bindir=$(_sypg_server_bindir) && port=$(_sypg_running "$dir" "$bindir"); then
    echo "private cluster: running in $dir, $(_sypg_private_url "$port")"
    rc=0
  else
    echo "private cluster: stopped ($dir)"
  fi
  return $rc
}

# sypg_destroy: stop the private cluster and delete what this script created in its directory.
sypg_destroy() {
  local dir
  sypg_stop || return 1
  if dir=$(_sypg_existing_dir); then
    _sypg_log "deleting the private cluster in $dir"
    rm -rf "${dir:?}/data" && rm -f "$dir/port" "$dir/.lock" "$dir/initdb.log" "$dir/postgres.log" || return 1
    rmdir "$dir" 2>/dev/null || true
  fi
  if _sypg_record_read && [ "$_SYPG_REC_SOURCE" = private ]; then
    rm -f "$(_sypg_record_file)"
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  case "${1:-start}" in
    start)
      sypg_ensure_app || exit 1
      printf 'export DATABASE_URL=%q\n' "$DATABASE_URL"
      ;;
    url)
      sypg_ensure_app || exit 1
      printf '%s\n' "$DATABASE_URL"
      ;;
    admin-url)
      sypg_ensure || exit 1
      printf '%s\n' "$SWITCHYARD_PG_ADMIN_URL"
      ;;
    stop) sypg_stop ;;
    status) sypg_status ;;
    forget) sypg_forget ;;
    destroy) sypg_destroy ;;
    -h | --help | help) sed -n '2,/^$/p' "$0" | sed -e 's/^# \{0,1\}//' ;;
    *)
      echo "usage: $0 [start|url|admin-url|status|stop|forget|destroy]" >&2
      exit 2
      ;;
  esac
elif [ "${1:-}" = app ]; then
  sypg_ensure_app || return 1
else
  sypg_ensure || return 1
fi
