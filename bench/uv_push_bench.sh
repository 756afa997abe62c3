#!/usr/bin/env bash
# bench/uv_push_bench.sh: the fleet merge of the UV family (docs/uv.md, bench/RESULTS.md).
# Two "hosts" (two segments) each hold a UV family with PLANS plans (default 8,000) for one
# day, ITEMS devices per plan (default 40; the push sends every plan's 12,304-byte dense
# string whatever its size, so the size does not change the cost), half shared between the
# hosts. Each runs `shmtool uv push` into one redis-server; the script prints the time of
# each push (= the fleet's merge: SET + PFMERGE + DEL per plan, pipelined) and checks one key.
#   bench/uv_push_bench.sh [SHMTOOL] [PLANS] [ITEMS]
set -euo pipefail
SHMTOOL=${1:-build/dev/shmtool/shmtool}
PLANS=${2:-8000}
ITEMS=${3:-40}
PORT=$((20000 + RANDOM % 20000))
NOW=1764547260
DIR=$(mktemp -d /tmp/uvpush-XXXXXX)
redis-server --bind 127.0.0.1 --port "$PORT" --save '' --appendonly no --daemonize yes --dir "$DIR" --loglevel warning
trap 'redis-cli -p $PORT shutdown nosave >/dev/null 2>&1 || true; $SHMTOOL remove uvpushA-$$ >/dev/null 2>&1 || true; $SHMTOOL remove uvpushB-$$ >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
for h in A B; do
  $SHMTOOL create uvpush$h-$$ --size 256MiB >/dev/null
  $SHMTOOL uv create uvpush$h-$$ uv >/dev/null
  off=0; [ $h = B ] && off=$((ITEMS / 2))
  awk -v p="$PLANS" -v n="$ITEMS" -v o="$off" 'BEGIN{for(s=0;s<p;s++)for(i=0;i<n;i++)print s, "dev-" s "-" (i+o)}' |
    $SHMTOOL uv add uvpush$h-$$ uv --now $NOW >/dev/null
done
for h in A B; do
  echo "host $h: $($SHMTOOL uv push uvpush$h-$$ uv --redis 127.0.0.1:$PORT --host-tag $h --now $NOW --json)"
done
echo "PFCOUNT uv:17:2025-12-01 = $(redis-cli -p $PORT PFCOUNT uv:17:2025-12-01) (true union $((ITEMS + ITEMS / 2)))"
echo "keys in redis: $(redis-cli -p $PORT DBSIZE)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
