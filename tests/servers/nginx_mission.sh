#!/usr/bin/env bash
# tests/servers/nginx_mission.sh MODE: the mission's shape through nginx (issue #22,
# "Done means"), scaled down to run in seconds on a 2-CPU machine; mission.py sends
# the requests (pipelined, 4 connections, 2 workers), keeps the exact oracle and
# states each bound:
#   uv        8,000 plans, daily and 7-bucket distinct devices (a UV family,
#             shmfilter_uv_add + shmfilter_count space=$plan window=7), ~33,000 adds
#             a day over 3 buckets of 4 s (the day, shortened: the module runs on the
#             system clock); per-plan counts against the oracle (exact below 1,000,
#             4 sigma above); with 8,000 per-plan HLLs added through nginx too,
#             /status and shmtool stats --prometheus <= 100 KB
#   overload  a cuckoo and a bloom window driven to 8x their expected day (160,000
#             pairs for expected=20,000) over 8,000 plans: 0 pairs served twice,
#             false positives within the asked rate (p1 + 4 sigma), no fail-open
#   exhaustion  the same window shape (expected=20,000, day buckets) in a segment
#             that cannot grow and has no room for an overflow layer, driven to 8x:
#             every acknowledged 'new' answers 'seen' when sent again (the workers
#             keep answering from what exists), the rest answer per shmfilter_fail
#             with the cause, and error.log gains at most 8 lines
# nginx_edges.sh has the 1-second-bucket exhaustion under wrk and the removed segment.
source "$(dirname "$0")/lib.sh"
MODE=${1:?uv, overload or exhaustion}
require nginx nginx; require curl curl
require_built

seg=$(segment_name mission)
port=$(free_port)
p=$(nginx_prefix mission)
BUCKET=${SHMF_MISSION_BUCKET:-4}  # seconds; a shorter one exercises the oracle's boundary handling
case $MODE in
uv)
  nginx_conf "$p" 2 "
    shmfilter_segment $seg create size=256m directory=9000;
    shmfilter_structure uv uv retention=7 bucket=${BUCKET}s create;
    # the per-plan HLL pattern the UV family replaces (8,000 names from requests): the
    # scrape must stay bounded with 8,000 structures in the directory too
    shmfilter_hll_add \$hll \"uv:\$arg_plan\" \$arg_device names=8000;
    shmfilter_uv_add \$uv_add   uv space=\$arg_plan \$arg_device;
    shmfilter_count  \$uv_today uv space=\$arg_plan;
    shmfilter_count  \$uv_week  uv space=\$arg_plan window=7;
    # the frequency cap beside it, so that the scrape holds a window of 8,000 plans too
    shmfilter_structure freq window expected=50000 create;
    shmfilter_mark   \$fc freq \$arg_device space=\$arg_plan window=7;
    server {
        listen 127.0.0.1:$port backlog=1024;
        location = /    { return 200 \"up\n\"; }
        location = /add { return 200 \"\$uv_add \$fc\n\"; }
        location = /uv  { return 200 \"\$uv_today \$uv_week\n\"; }
        location = /hll { return 200 \"\$hll \$shmfilter_error\n\"; }
        location = /status { shmfilter_status; }
    }"
  ;;
exhaustion)
  # 24 MiB that cannot grow: the window's first day table, then filled up by blooms,
  # so that no overflow layer fits
  SEG_ACCESS=""
  if [[ $(id -u) -eq 0 ]]; then SEG_ACCESS="mode=0o660, group=$(getent group "$(id -gn nobody)" | cut -d: -f3)"; fi
  "$PY" - "$seg" <<PYEOF || fail "could not create and fill the segment"
import sys, shmfilter
s = shmfilter.Segment.create(sys.argv[1], size=24 << 20, max_size=24 << 20${SEG_ACCESS:+, $SEG_ACCESS})
s.window("w", create=True, expected_per_bucket=20000, variant="cuckoo").close()
cap, k = 8_000_000, 0
while cap > 500:
    try:
        s.bloom("fill%d" % k, create=True, capacity=cap, error=0.01).close(); k += 1
    except shmfilter.Error:
        cap //= 2
s.close()
PYEOF
  nginx_conf "$p" 2 "
    shmfilter_segment $seg;
    shmfilter_mark \$fw w \$arg_device space=\$arg_plan;
    server {
        listen 127.0.0.1:$port backlog=1024;
        location = /  { return 200 \"up\n\"; }
        location = /m { return 200 \"\$fw \$shmfilter_error\n\"; }
        location = /status { shmfilter_status; }
    }"
  ;;
overload)
  # error=0.01 over the 7 buckets: p1 = 0.1435% a bucket (docs/window.md)
  nginx_conf "$p" 2 "
    shmfilter_segment $seg create size=64m;
    shmfilter_structure w_cuckoo window variant=cuckoo expected=20000 error=0.01 create;
    shmfilter_structure w_bloom  window variant=bloom  expected=20000 error=0.01 create;
    shmfilter_mark \$mc w_cuckoo \$arg_device space=\$arg_plan window=7;
    shmfilter_mark \$mb w_bloom  \$arg_device space=\$arg_plan window=7;
    shmfilter_seen \$sc w_cuckoo \$arg_device space=\$arg_plan window=7;
    shmfilter_seen \$sb w_bloom  \$arg_device space=\$arg_plan window=7;
    server {
        listen 127.0.0.1:$port backlog=1024;
        location = /  { return 200 \"up\n\"; }
        location = /m { return 200 \"\$mc \$mb \$shmfilter_error\n\"; }
        location = /s { return 200 \"\$sc \$sb \$shmfilter_error\n\"; }
        location = /status { shmfilter_status; }
    }"
  ;;
*) fail "unknown mode $MODE" ;;
esac
out=$(nginx_test_conf "$p") || fail "nginx -t: $out"
nginx_start "$p" "$port"
wait_workers "$p" 2
lines0=$(grep -c shmfilter "$p/error.log" || true)
case $MODE in
exhaustion)
  "$PY" "$SHMF_SOURCE_DIR/tests/servers/mission.py" exhaustion "$port" || fail "mission.py exhaustion"
  # Bound: once per (structure, cause) per worker (2 workers; full and no_space), plus
  # the count lines of a minute (none within this test's seconds): at most 8 new lines
  lines=$(( $(grep -c shmfilter "$p/error.log" || true) - lines0 ))
  bytes=$(wc -c <"$p/error.log")
  note "error.log: $lines new shmfilter lines, $bytes bytes in all"
  [[ $lines -le 8 && $bytes -le 16384 ]] || fail "error.log gained $lines shmfilter lines ($bytes bytes): not rate-limited"
  ;;
uv) "$PY" "$SHMF_SOURCE_DIR/tests/servers/mission.py" uv "$port" "$BUCKET" "$seg" "$SHMF_SHMTOOL" || fail "mission.py uv" ;;
overload) "$PY" "$SHMF_SOURCE_DIR/tests/servers/mission.py" overload "$port" "$seg" || fail "mission.py overload" ;;
esac
"$SHMF_SHMTOOL" check "$seg" >/dev/null || fail "shmtool check: $("$SHMF_SHMTOOL" check "$seg" 2>&1)"
n=$(grep -c shmfilter "$p/error.log" || true)
note "error.log: $n shmfilter lines"
[[ $MODE == exhaustion ]] || ! grep -E '\[(alert|crit|emerg)\]' "$p/error.log" || fail "alerts in error.log"
echo "PASS nginx_mission_$MODE"
