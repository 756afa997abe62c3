#!/usr/bin/env bash
# scripts/bench-servers.sh: the servers' targets (issue 14, bench/RESULTS.md):
#  1. nginx (2 workers) answering a frequency-capping request through the
#     module (mark on an exact set, add_header X-FC $fc; return 204) vs the
#     same nginx answering `return 204`, wrk, same connections, same query
#     strings (tests/servers/stream.lua), throughput and p99;
#  2. beside it the seed's design, one Redis round trip per request:
#     redis-benchmark SET (32 clients: throughput, p99; 1 client: the RTT);
#  3. gunicorn: the check from Python (ctypes, in process) vs a Redis SET NX
#     from the same process; and wrk through gunicorn (2 workers) on /noop,
#     /fc (shmfilter) and /redis.
#
#   ./scripts/bench-servers.sh [BUILD_DIR]   # default build/dev (needs target nginx_module)
#
# Prints markdown; writes it to bench/results/servers.md when BENCH_WRITE=1.
# Environment: DURATION (wrk seconds per run, default 5), PAIRS (alternating
# static/module run pairs, default 6), CONNS (default 32).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
export REPO
BUILD=$(cd "${1:-build/dev}" && pwd)
DURATION=${DURATION:-5}
PAIRS=${PAIRS:-6}
CONNS=${CONNS:-32}
MODULE=$BUILD/nginx/ngx_http_shmfilter_module.so
LIB=$BUILD/shared/libshmfilter.so
PY=/usr/bin/python3
for b in nginx wrk redis-server redis-benchmark curl; do
  command -v $b >/dev/null || { echo "bench-servers: $b missing: scripts/install-deps.sh" >&2; exit 1; }
done
[[ -f $MODULE && -f $LIB ]] || { echo "bench-servers: build the nginx_module target in $BUILD first" >&2; exit 1; }

W=$(mktemp -d /tmp/shmf-bench-servers-XXXXXX)
SEG=shmf-bench-servers-$$
PIDS=()
cleanup() {
  [[ -f $W/ngx/nginx.pid ]] && kill -QUIT "$(cat "$W/ngx/nginx.pid")" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 0.5
  rm -f "/dev/shm/$SEG" "/dev/shm/$SEG-py"
  rm -rf "$W"
}
trap cleanup EXIT
port() { echo $((10000 + RANDOM % 20000)); }  # below the ephemeral range (32768+)

NPORT=$(port); RPORT=$(port); GPORT=$(port)
mkdir -p "$W/ngx/tmp"
cat >"$W/ngx/nginx.conf" <<CONF
load_module $MODULE;
worker_processes 2;
error_log $W/ngx/error.log warn;
pid $W/ngx/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $W/ngx/tmp/b; proxy_temp_path $W/ngx/tmp/p; fastcgi_temp_path $W/ngx/tmp/f;
    uwsgi_temp_path $W/ngx/tmp/u; scgi_temp_path $W/ngx/tmp/s;
    keepalive_requests 10000000;
    shmfilter_segment $SEG create size=64m;
    shmfilter_structure pairs set capacity=1000000 create;
    shmfilter_mark \$fc pairs \$arg_plan \$arg_device;
    server {
        listen 127.0.0.1:$NPORT backlog=4096;
        location = /fc     { add_header X-FC \$fc; return 204; }
        location = /static { add_header X-FC static; return 204; }
    }
}
CONF
nginx -p "$W/ngx" -c "$W/ngx/nginx.conf" -e "$W/ngx/error.log"
sleep 0.5

wrkrun() { # wrkrun URL PATH -> "rps p99_ms"
  wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -s "$REPO/tests/servers/stream.lua" "$1" -- "$2" >"$W/wrk.out" 2>&1
  if grep -q "Non-2xx" "$W/wrk.out"; then echo "bench-servers: errors from $1$2: $(cat "$W/wrk.out")" >&2; exit 1; fi
  local rps p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$W/wrk.out")
  p99=$(awk '$1=="99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' "$W/wrk.out")
  echo "$rps $p99"
}
# Warm-up, then PAIRS pairs of runs alternating which path goes first: the
# shared machine's load drifts over seconds, so only close-in-time pairs
# compare; the table gives every pair and the median of the ratios.
wrk -t2 -c"$CONNS" -d2s -s "$REPO/tests/servers/stream.lua" "http://127.0.0.1:$NPORT" -- /fc >/dev/null
declare -a S F
for r in $(seq 1 "$PAIRS"); do
  if (( r % 2 )); then
    S[$r]=$(wrkrun "http://127.0.0.1:$NPORT" /static); F[$r]=$(wrkrun "http://127.0.0.1:$NPORT" /fc)
  else
    F[$r]=$(wrkrun "http://127.0.0.1:$NPORT" /fc); S[$r]=$(wrkrun "http://127.0.0.1:$NPORT" /static)
  fi
done
kill -QUIT "$(cat "$W/ngx/nginx.pid")"

redis-server --bind 127.0.0.1 --port "$RPORT" --save "" --appendonly no --dir "$W" --daemonize no \
  --loglevel warning >"$W/redis.log" 2>&1 &
PIDS+=("$!")
sleep 0.5
redis-benchmark -h 127.0.0.1 -p "$RPORT" -t set -n 400000 -c "$CONNS" -r 1000000 --csv >"$W/rb32.out" 2>&1
redis-benchmark -h 127.0.0.1 -p "$RPORT" -t set -n 50000 -c 1 -r 1000000 --csv >"$W/rb1.out" 2>&1
# --csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
rb_col() { awk -F, -v c="$2" '$1 == "\"SET\"" {gsub(/"/, "", $c); print $c}' "$1"; }
rb_rps() { rb_col "$1" 2; }
rb_p99() { rb_col "$1" 7; }
rb_avg() { rb_col "$1" 3; }

# gunicorn: in-process cost of the check vs a Redis call, then end to end.
"$PY" - "$LIB" "$SEG-py" "$RPORT" >"$W/py.out" <<'PYEOF'
import os, sys, time
os.environ["SHMFILTER_LIBRARY"] = sys.argv[1]
sys.path.insert(0, os.path.join(os.environ.get("REPO", "."), "python"))
import shmfilter, redis
seg = shmfilter.Segment.create(sys.argv[2], size=64 << 20)
s = seg.set("pairs", capacity=1_000_000, create=True)
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[3]))
keys = [f"{i % 3}:{i % 50000:04x}" for i in range(200_000)]
def per_call(f, ks):
    t = time.perf_counter()
    for k in ks:
        f(k)
    return (time.perf_counter() - t) / len(ks) * 1e6
mark = per_call(s.mark, keys)
rset = per_call(lambda k: r.set("fc:" + k, 1, nx=True), keys[:40_000])
print(f"{mark:.2f} {rset:.2f}")
s.close(); seg.close(); shmfilter.Segment.remove(sys.argv[2])
PYEOF
read -r PY_MARK PY_REDIS <"$W/py.out"

SHMF_SEGMENT=$SEG-py SHMFILTER_LIBRARY=$LIB SHMF_REDIS_PORT=$RPORT "$PY" -m gunicorn -w 2 -b "127.0.0.1:$GPORT" \
  --chdir "$REPO/python/examples" gunicorn_app:app >"$W/gunicorn.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 50); do curl -s "http://127.0.0.1:$GPORT/noop" >/dev/null && break; sleep 0.2; done
# Sync workers serve one connection at a time: 2 connections, one per worker,
# so latency is the request's cost, not queueing.
GD=$((DURATION / 2)); [[ $GD -ge 3 ]] || GD=3
CONNS_SAVE=$CONNS; CONNS=2
wrk -t2 -c2 -d2s -s "$REPO/tests/servers/stream.lua" "http://127.0.0.1:$GPORT" -- /fc >/dev/null   # each worker attaches
wrk -t2 -c2 -d1s -s "$REPO/tests/servers/stream.lua" "http://127.0.0.1:$GPORT" -- /redis >/dev/null
G_NOOP=$(DURATION=$GD wrkrun "http://127.0.0.1:$GPORT" /noop)
G_FC=$(DURATION=$GD wrkrun "http://127.0.0.1:$GPORT" /fc)
G_REDIS=$(DURATION=$GD wrkrun "http://127.0.0.1:$GPORT" /redis)
CONNS=$CONNS_SAVE

f() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else printf "%.3f\n", (v[NR/2]+v[NR/2+1])/2}'; }
ROWS=""; TR=""; PR=""
for r in $(seq 1 "$PAIRS"); do
  s_=(${S[$r]}); f_=(${F[$r]})
  tr=$(f "${f_[0]}" "${s_[0]}"); pr=$(f "${f_[1]}" "${s_[1]}")
  ROWS+="| $r | ${s_[0]} | ${s_[1]} | ${f_[0]} | ${f_[1]} | $tr | $pr |"$'\n'
  TR+="$tr"$'\n'; PR+="$pr"$'\n'
done
TR_MED=$(printf '%s' "$TR" | median); PR_MED=$(printf '%s' "$PR" | median)
gn=($G_NOOP); gf=($G_FC); gr=($G_REDIS)
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
cat >"$W/servers.md" <<MD
## nginx module and gunicorn (scripts/bench-servers.sh)

Machine: $(nproc) vCPU "$cpu" ($(lscpu | sed -n 's/^Hypervisor vendor: *//p') guest), Debian 12, nginx $(nginx -v 2>&1 | sed 's/.*\///'),
wrk 4.1, Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), Python $("$PY" -c 'import platform; print(platform.python_version())'), gunicorn sync workers. Load average
at start: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared with other builds: expect +-20%).
Client and servers share the same $(nproc) cores, so these are ratios on one box, not capacity numbers.

Command: \`DURATION=$DURATION PAIRS=$PAIRS CONNS=$CONNS scripts/bench-servers.sh $1\` (build: $(grep -m1 CMAKE_BUILD_TYPE "$BUILD/CMakeCache.txt" | cut -d= -f2), kill points $(grep -m1 SHMFILTER_KILL_POINTS "$BUILD/CMakeCache.txt" | cut -d= -f2)) ($(date -u '+%Y-%m-%d %H:%M UTC'))

### nginx: the module's frequency-capping answer vs \`return 204\` (2 workers, wrk -t2 -c$CONNS, $PAIRS pairs of ${DURATION} s runs)

Same nginx, same connections, same query strings (tests/servers/stream.lua: 15,000 distinct
(plan, device) pairs, each repeated); /fc marks the pair in an exact set and sends X-FC: new|seen.

| pair | return 204: req/s | p99 ms | module /fc: req/s | p99 ms | throughput ratio | p99 ratio |
|---|---|---|---|---|---|---|
${ROWS}| **median** | | | | | **$TR_MED** | **$PR_MED** |

Target: throughput within 10% (ratio >= 0.90) and p99 within 1.2x.

### Beside it: one Redis round trip per request (the seed's design)

| redis-benchmark SET, 127.0.0.1 | req/s | mean ms | p99 ms |
|---|---|---|---|
| $CONNS clients | $(rb_rps "$W/rb32.out") | $(rb_avg "$W/rb32.out") | $(rb_p99 "$W/rb32.out") |
| 1 client (the round trip itself) | $(rb_rps "$W/rb1.out") | $(rb_avg "$W/rb1.out") | $(rb_p99 "$W/rb1.out") |

This is the floor of that design: a front end that makes one Redis call per request can not
answer faster than Redis answers one client (the 1-client row is the RTT on loopback; over a
network add the wire), and all hosts share that one Redis.

### gunicorn (Debian python3-gunicorn, 2 sync workers)

In process, per call (one Python thread, ${PY_MARK:+200,000} calls): \`ExactSet.mark(key)\` through ctypes
**${PY_MARK} us**; \`redis.Redis.set(key, 1, nx=True)\` to the local Redis **${PY_REDIS} us**.

| wrk -t2 -c2 (one connection per worker), ${GD} s | req/s | p99 ms | per request beyond /noop |
|---|---|---|---|
| /noop (the framework alone) | ${gn[0]} | ${gn[1]} | |
| /fc (shmfilter mark) | ${gf[0]} | ${gf[1]} | $(awk -v a="${gf[0]}" -v b="${gn[0]}" 'BEGIN {printf "%.1f us", (2/a - 2/b) * 1e6}') |
| /redis (SET NX per request) | ${gr[0]} | ${gr[1]} | $(awk -v a="${gr[0]}" -v b="${gn[0]}" 'BEGIN {printf "%.1f us", (2/a - 2/b) * 1e6}') |

(per request beyond /noop = 2 workers / throughput - the same for /noop: the added worker time per request.)
MD
cat "$W/servers.md"
if [[ ${BENCH_WRITE:-0} == 1 ]]; then cp "$W/servers.md" "$REPO/bench/results/servers.md"; echo "wrote bench/results/servers.md"; fi
