#!/usr/bin/env bash
# tests/servers/nginx_edges.sh MODE: the module at its edges (docs/nginx.md,
# "Failures" and "A removed segment"), each a few seconds:
#   exhaustion  a window whose segment has no room for the next bucket's table:
#               old pairs still answer seen, new ones answer per shmfilter_fail
#               with $shmfilter_error = no_space, and under wrk load the
#               error.log gets a bounded number of lines (once per structure
#               and cause per worker), not one per request
#   removed     /dev/shm/NAME removed under running workers: noticed within
#               seconds (shmfilter_segment_unlinked, one log line), rescued by
#               a worker (save + restore), then reloads: no pair served twice,
#               also of a stream of fresh pairs over 8,000 plans (pipelined, 4
#               connections) that runs through both removals and reloads
#   names       names built from request data: bounded in count (names=N),
#               in characters (bad_name), a full directory (directory=) backs
#               off; shmtool list shows the bound held
source "$(dirname "$0")/lib.sh"
MODE=${1:?exhaustion, removed or names}
require nginx nginx; require curl curl; require wrk wrk
require_built

seg=$(segment_name edges)
port=$(free_port)
p=$(nginx_prefix edges)
U="http://127.0.0.1:$port"

# status_value METRIC_REGEX: the sum of the matching samples of /status
status_value() { get "$U/status" | awk -v re="$1" '$0 ~ "^" re { s += $NF } END { print s + 0 }'; }

# batch FILE URL...: one curl process for many requests, bodies to stdout
batch() {
  local f=$1; shift
  for u in "$@"; do echo "url = \"$u\""; done >"$f"
  curl -sS --max-time 30 -K "$f"
}

# the workers' user may open what this test creates as root (docs/nginx.md, Users)
SEG_ACCESS=""
if [[ $(id -u) -eq 0 ]]; then SEG_ACCESS="mode=0o660, group=$(getent group "$(id -gn nobody)" | cut -d: -f3)"; fi

case $MODE in
exhaustion)
  # 8 MiB that cannot grow: one window of 1-second buckets, then filled up
  "$PY" - "$seg" <<PYEOF || fail "could not create the segment"
import sys, shmfilter
s = shmfilter.Segment.create(sys.argv[1], size=8 << 20, max_size=8 << 20${SEG_ACCESS:+, $SEG_ACCESS})
s.window("w", create=True, expected_per_bucket=20000, retention=8, bucket_seconds=1, variant="cuckoo").close()
s.set("flap", create=True, capacity=16).close()
s.close()
PYEOF
  nginx_conf "$p" 2 "
    shmfilter_segment $seg;
    shmfilter_maintain 1s;
    shmfilter_mark \$fw w \$arg_device space=\$arg_plan;
    shmfilter_mark \$ff flap \$arg_device;
    server {
        listen 127.0.0.1:$port;
        location = /   { return 200 \"up\n\"; }
        location = /w  { return 200 \"\$fw \$shmfilter_error\n\"; }
        location = /f  { return 200 \"\$ff \$shmfilter_error\n\"; }
        location = /status { shmfilter_status; }
    }"
  nginx_start "$p" "$port"
  wait_workers "$p" 2
  flap0=$(grep -c shmfilter "$p/error.log" || true)
  note "a structure dropped and recreated every 5 ms for 2 s under wrk: reopened, logged once per cause"
  "$PY" - "$seg" <<'PYEOF' &
import sys, shmfilter
s = shmfilter.Segment.open(sys.argv[1])
import time
end, n = time.time() + 2.0, 0
while time.time() < end:
    try:
        s.drop("flap")
    except shmfilter.Error:
        pass
    s.set("flap", create=True, capacity=16).close()
    n += 1
    time.sleep(0.005)
print("flapped", n, "times")
PYEOF
  FLAP=$!
  wrk -t2 -c16 -d2s --timeout 2s -s "$SHMF_SOURCE_DIR/tests/servers/stream.lua" "$U" -- /f >"$T_DIR/wrk2.out" 2>&1 ||
    fail "wrk failed: $(cat "$T_DIR/wrk2.out")"
  wait "$FLAP" || fail "the drop/create loop failed"
  dropped=$(status_value 'shmfilter_failures_total\{.*cause="dropped"\}')
  lines2=$(( $(grep -c shmfilter "$p/error.log" || true) - flap0 ))
  note "flapping: $dropped evaluations answered dropped, $lines2 new shmfilter lines in error.log"
  [[ $lines2 -le 12 ]] || fail "a flapping structure left $lines2 lines in error.log ($dropped dropped answers): not rate-limited"
  urls=(); for i in $(seq 1 50); do urls+=("$U/w?plan=7&device=old$i"); done
  n=$(batch "$T_DIR/old.curl" "${urls[@]}" | grep -c '^new $' || true)
  expect_eq "old pairs marked" "$n" 50
  note "fill the segment: no bucket table fits any more"
  "$PY" - "$seg" <<'PYEOF' || fail "could not fill the segment"
import sys, shmfilter
s = shmfilter.Segment.open(sys.argv[1])
cap, k = 8_000_000, 0
while cap > 1000:
    try:
        s.bloom("fill%d" % k, create=True, capacity=cap, error=0.01).close(); k += 1
    except shmfilter.Error:
        cap //= 2
PYEOF
  # the tables prepared ahead (maintain) last at most 2 buckets of 1 s
  ok=0
  for _ in $(seq 100); do
    [[ $(get "$U/w?plan=7&device=probe$RANDOM$RANDOM") == "new no_space" ]] && { ok=1; break; }
    sleep 0.1
  done
  [[ $ok == 1 ]] || fail "10 s after the segment filled, a new pair is not answered 'new no_space'"
  # the marks above are within the window's 8 buckets: seen from what exists
  urls=(); for i in $(seq 1 50); do urls+=("$U/w?plan=7&device=old$i"); done
  batch "$T_DIR/old2.curl" "${urls[@]}" >"$T_DIR/old2.out"
  n=$(grep -c '^seen no_space$' "$T_DIR/old2.out" || true)
  [[ $n == 50 ]] || fail "old pairs while no table can be allocated: $(sort "$T_DIR/old2.out" | uniq -c | tr '\n' ' ') (expected 50 'seen no_space')"
  lines0=$(grep -c shmfilter "$p/error.log" || true)
  note "wrk: 3 s of new pairs on the exhausted window ($lines0 shmfilter lines so far)"
  wrk -t2 -c16 -d3s --timeout 2s -s "$SHMF_SOURCE_DIR/tests/servers/stream.lua" "$U" -- /w >"$T_DIR/wrk.out" 2>&1 ||
    fail "wrk failed: $(cat "$T_DIR/wrk.out")"
  cat "$T_DIR/wrk.out"
  reqs=$(awk '/requests in/ {print $1}' "$T_DIR/wrk.out")
  nospace=$(status_value 'shmfilter_failures_total\{.*cause="no_space"\}')
  # (a bucket that expires frees its table: a later bucket may get one for a while)
  [[ $nospace -ge $((reqs / 4)) ]] || fail "shmfilter_failures_total{cause=no_space} is $nospace after $reqs requests on an exhausted segment"
  lines=$(( $(grep -c shmfilter "$p/error.log" || true) - flap0 - lines2 ))
  bytes=$(wc -c <"$p/error.log")
  note "error.log: $lines shmfilter lines, $bytes bytes after $reqs requests answered no_space"
  # per worker: the window's no_space line (requests and worker 0's maintain share
  # it), the attach notices; the minute's count lines cannot come within 3 s
  [[ $lines -le 12 && $bytes -le 16384 ]] || fail "error.log has $lines shmfilter lines, $bytes bytes: not rate-limited"
  ;;

removed)
  nginx_conf "$p" 2 "
    shmfilter_segment $seg create size=64m;
    shmfilter_structure pairs set capacity=100000 create;
    # sized far above the 800 pairs: no false positive to tell from a loss
    shmfilter_structure freq window variant=cuckoo expected=1000000 create;
    shmfilter_mark \$fc pairs \$arg_plan \$arg_device;
    shmfilter_mark \$fw freq \$arg_device space=\$arg_plan;
    server {
        listen 127.0.0.1:$port;
        location = /   { return 200 \"up\n\"; }
        location = /m  { return 200 \"\$fc \$fw\n\"; }
        location = /status { shmfilter_status; }
    }"
  nginx_start "$p" "$port"
  wait_workers "$p" 2
  # mark N pairs of set TAG (200, or N); prints how many answered "new new"
  mark() {
    local urls=() i
    for i in $(seq 1 "${2:-200}"); do urls+=("$U/m?plan=$((i % 7))&device=$1$i"); done
    batch "$T_DIR/$1.curl" "${urls[@]}" >"$T_DIR/$1.out"
    grep -c '^new new$' "$T_DIR/$1.out" || true
  }
  # expect_marks WHAT TAG N: marking TAG's 200 pairs answers N "new new" and the
  # others "seen seen" (set and window agree: none lost by either)
  expect_marks() {
    local n s; n=$(mark "$2")
    s=$(grep -c '^seen seen$' "$T_DIR/$2.out" || true)
    [[ $n == "$3" && $((n + s)) == 200 ]] ||
      fail "$1: $n of 200 answered 'new new', expected $3 (answers: $(sort "$T_DIR/$2.out" | uniq -c | tr '\n' ' '))"
  }
  expect_marks "pairs A marked" a 200
  expect_eq "unlinked before" "$(status_value 'shmfilter_segment_unlinked')" 0
  # the mission's shape beside the batches below: fresh pairs over 8,000 plans, pipelined
  # over 4 connections, through both removals, rescues and reloads (tests/servers/mission.py)
  "$PY" "$SHMF_SOURCE_DIR/tests/servers/mission.py" stream "$port" "$T_DIR/stream.stop" "$T_DIR/stream.out" &
  STREAM=$!
  T_PIDS+=("$STREAM")
  ino=$(stat -c %i "/dev/shm/$seg")
  t0=$(date +%s.%N)
  rm "/dev/shm/$seg"
  expect_marks "pairs B marked in the removed segment" b 200
  # noticed within seconds: the rescue re-creates the name, every worker attaches it
  seen_unlinked=0
  for _ in $(seq 200); do
    [[ $(status_value 'shmfilter_segment_unlinked') == 1 ]] && seen_unlinked=1
    [[ -e /dev/shm/$seg && $(status_value 'shmfilter_segment_rescues_total') -ge 1 &&
       $(status_value 'shmfilter_segment_unlinked') == 0 ]] && break
    sleep 0.05
  done
  t1=$(date +%s.%N)
  [[ -e /dev/shm/$seg ]] || fail "the removed segment was not re-created within 10 s"
  [[ $(stat -c %i "/dev/shm/$seg") != "$ino" ]] || fail "the segment's inode did not change"
  expect_eq "rescues" "$(status_value 'shmfilter_segment_rescues_total')" 1
  expect_eq "unlinked after the rescue" "$(status_value 'shmfilter_segment_unlinked')" 0
  note "removal noticed and rescued in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s (unlinked seen: $seen_unlinked)"
  n=$(grep -c 'was removed under the running workers' "$p/error.log" || true)
  [[ $n -ge 1 && $n -le 2 ]] || fail "the removal was logged $n times, expected once per worker that noticed it (1..2)"
  expect_marks "pairs A seen after the rescue" a 0
  expect_marks "pairs B seen after the rescue" b 0
  note "reload: the new workers attach the rescued segment"
  before=$(nginx_workers "$p" | tr '\n' ' ')
  nginx -p "$p" -c "$p/nginx.conf" -e "$p/error.log" -s reload
  for _ in $(seq 200); do
    after=$(nginx_workers "$p" | tr '\n' ' ')
    [[ -n $after && $after != "$before" && $(nginx_workers "$p" | wc -l) -eq 2 ]] && break
    sleep 0.05
  done
  expect_marks "pairs A seen after the reload" a 0
  expect_marks "pairs B seen after the reload" b 0
  note "removed again, reloaded at once: the master waits for the workers' rescue"
  expect_marks "pairs C marked" c 200
  before=$(nginx_workers "$p" | tr '\n' ' ')
  # marks go on while the workers notice, rescue, switch and reload: 12 batches over 3 s
  (for k in $(seq 0 11); do mark "e$k" 20 >/dev/null; sleep 0.25; done) &
  MARKER=$!
  # removed and reloaded at once: the master finds the name absent before any
  # worker's check (every second) noticed it
  rm "/dev/shm/$seg"; nginx -p "$p" -c "$p/nginx.conf" -e "$p/error.log" -s reload
  expect_marks "pairs D marked during the reload" d 200
  for _ in $(seq 400); do
    after=$(nginx_workers "$p" | tr '\n' ' ')
    [[ -n $after && $after != "$before" && $(nginx_workers "$p" | wc -l) -eq 2 ]] && break
    sleep 0.05
  done
  [[ $after != "$before" ]] || fail "the reload did not start new workers within 20 s"
  # the old workers replay what they marked during the rescue as they leave
  for w in $before; do wait_exit "$w" "old worker"; done
  wait "$MARKER" || fail "the marking loop failed"
  touch "$T_DIR/stream.stop"
  wait "$STREAM" || fail "the 8,000-plan stream failed"
  "$PY" "$SHMF_SOURCE_DIR/tests/servers/mission.py" recheck "$port" "$T_DIR/stream.out" ||
    fail "pairs of the 8,000-plan stream served twice after remove + rescue + reload"
  for k in $(seq 0 11); do
    [[ $(grep -c '^new new$' "$T_DIR/e$k.out") == 20 ]] ||
      fail "batch e$k during the rescue and reload: $(sort "$T_DIR/e$k.out" | uniq -c | tr '\n' ' ')"
  done
  for t in a b c d; do expect_marks "pairs ${t^^} seen after remove + reload (none served twice)" $t 0; done
  for k in $(seq 0 11); do
    n=$(mark "e$k" 20)
    [[ $n == 0 && $(grep -c '^seen seen$' "$T_DIR/e$k.out") == 20 ]] ||
      fail "batch e$k marked during the rescue and reload, served again: $(sort "$T_DIR/e$k.out" | uniq -c | tr '\n' ' ')"
  done
  grep -q 'is absent while running workers map its state: waiting' "$p/error.log" ||
    fail "the master did not wait for the rescue"
  note "replays: $(grep -o 'replayed [0-9]* marks' "$p/error.log" | tr '\n' ' ')"
  ;;

names)
  nginx_conf "$p" 2 "
    shmfilter_segment $seg create size=16m directory=32;
    shmfilter_structure pairs set capacity=1000 create;
    map \$http_x_plan \$plan { default \$http_x_plan; \"\" \$arg_plan; }
    shmfilter_hll_add \$uv_add \"uv:\$plan\" \$arg_device names=8;
    shmfilter_count   \$uv     \"uv:\$plan\";
    shmfilter_hll_add \$d_add  \"d:\$plan\" \$arg_device names=1000;
    server {
        listen 127.0.0.1:$port;
        location = /   { return 200 \"up\n\"; }
        location = /uv { return 200 \"\$uv_add \$shmfilter_error\n\"; }
        location = /n  { return 200 \"\$uv \$shmfilter_error\n\"; }
        location = /d  { return 200 \"\$d_add \$shmfilter_error\n\"; }
        location = /status { shmfilter_status; }
    }"
  nginx_start "$p" "$port"
  wait_workers "$p" 2
  urls=(); for i in $(seq 1 30); do urls+=("$U/uv?plan=$i&device=x"); done
  out=$(batch "$T_DIR/uv.curl" "${urls[@]}")
  expect_eq "names=8: created" "$(grep -c '^1 $' <<<"$out" || true)" 8
  expect_eq "names=8: refused" "$(grep -c '^0 names_full$' <<<"$out" || true)" 22
  expect_eq "an existing name still counts" "$(get "$U/n?plan=3")" "1 "
  expect_eq "a refused name counts nothing" "$(get "$U/n?plan=30")" "0 "
  expect_eq "bytes outside the safe set" "$(get -H $'X-Plan: \xed\xa0\x80' "$U/uv?device=x")" "0 bad_name"
  expect_eq "a name with a slash" "$(get "$U/uv?plan=a/b&device=x")" "0 bad_name"
  expect_eq "a name of 64 bytes" "$(get "$U/uv?plan=$(printf 'p%.0s' $(seq 61))&device=x")" "0 bad_name"
  expect_eq "shmfilter_request_names" "$(status_value 'shmfilter_request_names\{.*variable="\$uv_add",bound="count"\}')" 8
  note "a directory of 32 entries filled by requests: directory_full, then a backoff"
  urls=(); for i in $(seq 1 60); do urls+=("$U/d?plan=$i&device=x"); done
  out=$(batch "$T_DIR/d.curl" "${urls[@]}")
  made=$(grep -c '^1 $' <<<"$out" || true)
  # 32 slots: pairs and the 8 uv: names hold 9
  expect_eq "d: names created until the directory was full" "$made" 23
  expect_eq "d: refused" "$(grep -c '^0 directory_full$' <<<"$out" || true)" 37
  n=$("$SHMF_SHMTOOL" list "$seg" | grep -c '^ *uv:\|uv:' || true)
  expect_eq "uv: names in the segment" "$n" 8
  lines=$(grep -c 'shmfilter' "$p/error.log" || true)
  [[ $lines -le 12 ]] || fail "error.log has $lines shmfilter lines after refused names: not rate-limited"
  ;;
*) fail "unknown mode $MODE" ;;
esac
echo "PASS nginx_edges_$MODE"
