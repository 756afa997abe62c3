#!/usr/bin/env bash
# tests/servers/nginx_load.sh MODE: wrk (2 threads, 64 connections, 4 s) sends
# the known stream of stream.lua to nginx (4 workers); oracle.py checks every
# answer in the access log against it: the exact set, a Bloom filter, and the
# frequency-capping windows (cuckoo and bloom variants, space = plan).
#   plain   exact oracle on the exact set; Bloom false positives counted, bounded
#   kill    a worker is SIGKILLed mid-load: the master respawns it, nothing
#           acknowledged is lost, unanswered marks bounded by the connections
#   reload  `nginx -s reload` twice mid-load: new workers attach, exact oracle
#   upgrade the binary upgrade mid-load (USR2: a new master and its workers
#           start beside the old ones, then QUIT to the old master): the
#           segment and its contents carry over, exact oracle
source "$(dirname "$0")/lib.sh"
MODE=${1:?plain, kill or reload}
require nginx nginx; require curl curl; require wrk wrk
require_built

CONNS=64

seg=$(segment_name load)
port=$(free_port)
p=$(nginx_prefix load)
# Bloom: capacity 100,000 at 0.1%: at 15,000 keys the per-key FP rate is ~1e-7
# (fp_rate_now), so the expected false positives are ~0.002: bound 2.
HTTP="
    shmfilter_segment $seg create size=64m;
    shmfilter_structure pairs set capacity=100000 create;
    shmfilter_structure pairs_bloom bloom capacity=100000 error=0.001 create;
    shmfilter_mark \$fc pairs \$arg_plan \$arg_device;
    shmfilter_mark \$fcb pairs_bloom \$arg_plan \$arg_device;
    # the frequency cap on windows: (plan, device) over 7 day buckets, both variants
    shmfilter_structure freq window variant=cuckoo expected=100000 create;
    shmfilter_structure freq_bloom window variant=bloom expected=100000 create;
    shmfilter_mark \$fw freq \$arg_device space=\$arg_plan window=7;
    shmfilter_mark \$fwb freq_bloom \$arg_device space=\$arg_plan window=7;
    log_format fc '\$arg_plan \$arg_device \$fc \$fcb \$fw \$fwb';
    server {
        listen 127.0.0.1:$port backlog=1024;
        location = /   { return 200 \"up\n\"; }
        location = /fc { access_log $p/logs/access.log fc; return 200 \"\$fc\n\"; }
    }"
nginx_conf "$p" 4 "$HTTP"
nginx_start "$p" "$port"
wait_workers "$p" 4
before=$(nginx_workers "$p" | tr '\n' ' ')

wrk -t2 -c$CONNS -d4s --timeout 2s -s "$SHMF_SOURCE_DIR/tests/servers/stream.lua" "http://127.0.0.1:$port" \
  >"$T_DIR/wrk.out" 2>&1 &
WRK=$!
T_PIDS+=("$WRK")
sleep 1.5
case $MODE in
  plain) ;;
  kill)
    victim=$(nginx_workers "$p" | head -1)
    note "SIGKILL worker $victim under load"
    kill -KILL "$victim"
    ;;
  reload)
    note "nginx -s reload under load (twice)"
    nginx -p "$p" -c "$p/nginx.conf" -e "$p/error.log" -s reload
    sleep 1
    nginx -p "$p" -c "$p/nginx.conf" -e "$p/error.log" -s reload
    ;;
  upgrade)
    old=$(nginx_master "$p")
    note "binary upgrade under load: USR2 to master $old"
    kill -USR2 "$old"
    for _ in $(seq 600); do [[ -f $p/nginx.pid.oldbin && -s $p/nginx.pid ]] && break; sleep 0.05; done
    [[ -f $p/nginx.pid.oldbin ]] || fail "USR2 did not start a new master"
    new=$(nginx_master "$p")
    [[ $new != "$old" ]] || fail "nginx.pid still names the old master"
    wait_workers "$p" 4
    sleep 0.5
    kill -QUIT "$old"
    ;;
  *) fail "unknown mode $MODE" ;;
esac
wait "$WRK" || fail "wrk failed: $(cat "$T_DIR/wrk.out")"
cat "$T_DIR/wrk.out"
grep -q "Requests/sec" "$T_DIR/wrk.out" || fail "wrk printed no result"

case $MODE in
  kill)
    wait_workers "$p" 4
    grep -q "worker process $victim exited on signal 9" "$p/error.log" || fail "the master did not see worker $victim die"
    # the respawned worker attached by itself and answers
    for i in $(seq 1 8); do expect_eq "after respawn" "$(get "http://127.0.0.1:$port/fc?plan=9&device=after$i")" "new"; done
    ;;
  reload|upgrade)
    wait_workers "$p" 4
    after=$(nginx_workers "$p" | tr '\n' ' ')
    [[ "$before" != "$after" ]] || fail "reload did not replace the workers ($before)"
    ;;
esac
# the log is written after the response: stop nginx first so every line is there
master=$(nginx_master "$p")
kill -QUIT "$master"
wait_exit "$master" "the nginx master, sent QUIT,"
grep -v '^9 after' "$p/logs/access.log" >"$T_DIR/stream.log" || true
if [[ $MODE == kill ]]; then
  "$PY" "$SHMF_SOURCE_DIR/tests/servers/oracle.py" --log "$T_DIR/stream.log" --segment "$seg" --mode killed \
    --slack $CONNS --bloom-fp-max $((2 + CONNS)) --window freq --window-bloom freq_bloom || fail "oracle"
else
  "$PY" "$SHMF_SOURCE_DIR/tests/servers/oracle.py" --log "$T_DIR/stream.log" --segment "$seg" --mode exact \
    --window freq --window-bloom freq_bloom || fail "oracle"
fi
echo "PASS nginx_load_$MODE"
