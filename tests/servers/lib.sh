# tests/servers/lib.sh: shared helpers of the real-server tests (sourced).
# Every helper fails loudly; nothing is skipped. Set by the caller (ctest):
#   SHMF_NGINX_MODULE  the built ngx_http_shmfilter_module.so
#   SHMF_SHMTOOL       the built shmtool
#   SHMF_LIBRARY       the built libshmfilter.so (Python binding)
#   SHMF_SOURCE_DIR    the repository
# Processes started through these helpers and /dev/shm/shmf-test-* objects
# named by the test are removed on exit, whatever the exit path.
set -euo pipefail

T_DIR=$(mktemp -d /tmp/shmf-test-servers-XXXXXX)
T_PIDS=()          # pids to kill at exit (masters, servers)
T_SEG_PREFIX="shmf-test-$$-" # every /dev/shm object of this test; removed at exit
T_NGINX_PREFIXES=() # nginx prefixes whose master to stop at exit
PY=${SHMF_PYTHON:-/usr/bin/python3}
export PYTHONPATH=${SHMF_SOURCE_DIR:-}/python${PYTHONPATH:+:$PYTHONPATH}

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "--- $*"; }

t_cleanup() {
  local rc=$?
  local p pid
  for p in "${T_NGINX_PREFIXES[@]}"; do
    if [[ -f $p/nginx.pid ]]; then
      pid=$(cat "$p/nginx.pid" 2>/dev/null || true)
      [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for pid in "${T_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  # bounded wait, then SIGKILL whatever is left (workers included)
  for _ in $(seq 50); do
    local alive=0
    for p in "${T_NGINX_PREFIXES[@]}"; do
      [[ -f $p/nginx.pid ]] && kill -0 "$(cat "$p/nginx.pid" 2>/dev/null || echo 0)" 2>/dev/null && alive=1
    done
    for pid in "${T_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 0.1
  done
  for p in "${T_NGINX_PREFIXES[@]}"; do
    if [[ -f $p/nginx.pid ]]; then
      pid=$(cat "$p/nginx.pid" 2>/dev/null || true)
      [[ -n $pid ]] && { pkill -KILL -P "$pid" 2>/dev/null || true; kill -KILL "$pid" 2>/dev/null || true; }
    fi
  done
  for pid in "${T_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -f /dev/shm/"$T_SEG_PREFIX"*
  if [[ $rc -ne 0 ]]; then
    for f in "$T_DIR"/*/error.log "$T_DIR"/*.log; do
      [[ -f $f ]] && { echo "==== $f (last 30 lines)"; tail -30 "$f"; }
    done
  fi
  rm -rf "$T_DIR"
  exit $rc
}
trap t_cleanup EXIT
trap 'exit 130' INT TERM

# require BINARY PACKAGE: a missing binary fails the test and names the package.
require() {
  command -v "$1" >/dev/null 2>&1 || [[ -x $1 ]] || fail "'$1' not found: install Debian package $2 (scripts/install-deps.sh)"
}
require_py() { # require_py MODULE PACKAGE
  "$PY" -c "import $1" 2>/dev/null || fail "$PY cannot import $1: install Debian package $2 (scripts/install-deps.sh)"
}
require_built() {
  [[ -n ${SHMF_NGINX_MODULE:-} && -f $SHMF_NGINX_MODULE ]] ||
    fail "SHMF_NGINX_MODULE='${SHMF_NGINX_MODULE:-}' is not a built module: build target nginx_module (needs nginx-dev)"
  [[ -n ${SHMF_SHMTOOL:-} && -x $SHMF_SHMTOOL ]] || fail "SHMF_SHMTOOL='${SHMF_SHMTOOL:-}' is not a built shmtool"
}

# free_port: a loopback TCP port nothing listens on (random, checked), below
# the kernel's ephemeral range: a port there may be the local end of some
# client connection (wrk's), and then nginx's bind() fails.
free_port() {
  local port lo
  lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  [[ $lo -gt 12000 ]] || lo=32768
  for _ in $(seq 100); do
    port=$((10000 + RANDOM % (lo - 10000)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
  done
  fail "no free loopback port found"
}

# segment_name TAG: a unique /dev/shm name, removed at exit ($$ is this
# script's pid in subshells too).
segment_name() { echo "${T_SEG_PREFIX}$1"; }

# nginx_prefix NAME: a fresh prefix directory for one nginx instance.
nginx_prefix() {
  local p=$T_DIR/$1
  mkdir -p "$p/tmp" "$p/logs"
  echo "$p"
}

# nginx_conf PREFIX WORKERS HTTP_BODY: writes PREFIX/nginx.conf around HTTP_BODY.
nginx_conf() {
  local p=$1 workers=$2 body=$3
  local user_line=""
  # Workers of a root master run as the `user` directive says (default nobody):
  # the module gives a segment it creates to that user's group (docs/nginx.md).
  cat >"$p/nginx.conf" <<CONF
load_module $SHMF_NGINX_MODULE;
worker_processes $workers;
error_log $p/error.log notice;
pid $p/nginx.pid;
$user_line
events { worker_connections 2048; }
http {
    access_log off;
    client_body_temp_path $p/tmp/body;
    proxy_temp_path $p/tmp/proxy;
    fastcgi_temp_path $p/tmp/fastcgi;
    uwsgi_temp_path $p/tmp/uwsgi;
    scgi_temp_path $p/tmp/scgi;
    keepalive_requests 1000000;
$body
}
CONF
}

nginx_test_conf() { nginx -p "$1" -c "$1/nginx.conf" -e "$1/error.log" -t 2>&1; }

# nginx_start PREFIX PORT: starts the master (daemon) and waits until PORT answers.
nginx_start() {
  local p=$1 port=$2
  T_NGINX_PREFIXES+=("$p")
  # by absolute path: the binary upgrade (USR2) re-executes argv[0]
  "$(command -v nginx)" -p "$p" -c "$p/nginx.conf" -e "$p/error.log" || fail "nginx did not start (see $p/error.log)"
  # bounded: 600 tries ~ 30 s (a loaded CI machine may not run a fresh master for seconds)
  for _ in $(seq 600); do
    if curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  fail "nginx on port $port did not answer within 600 tries (30 s or more)"
}

nginx_master() { cat "$1/nginx.pid"; }
nginx_workers() { pgrep -P "$(nginx_master "$1")" -f "nginx: worker process" | sort -n; }

# wait_workers PREFIX N: until the master has N workers (bounded, 600 tries ~ 30 s).
wait_workers() {
  for _ in $(seq 600); do
    [[ $(nginx_workers "$1" | wc -l) -eq $2 ]] && return 0
    sleep 0.05
  done
  fail "master $(nginx_master "$1") has $(nginx_workers "$1" | wc -l) workers, expected $2"
}

# wait_exit PID WHAT: until PID is gone (bounded, 600 tries ~ 30 s), else fail naming WHAT.
wait_exit() {
  for _ in $(seq 600); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.05
  done
  fail "$2 (pid $1) still runs 30 s after it was asked to stop"
}

# expect_eq WHAT GOT WANT
expect_eq() { [[ "$2" == "$3" ]] || fail "$1: got '$2', expected '$3'"; }

get() { curl -sS --max-time 5 "$@"; }
