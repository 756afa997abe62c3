#!/usr/bin/env bash
# tests/servers/nginx_cap.sh: frequency caps through nginx (issue 24, docs/nginx.md
# "Frequency caps of N"): `shmfilter_mark $v NAME KEY space=... cap=N window=W` on a
# window of variant=stamped answers `allowed` at most N times per (plan, device) in
# the last W buckets and `capped` after, across 4 worker processes racing (reuseport
# spreads the connections): more than N concurrent requests per device, exactly N
# allowed, each answer counted in shmfilter_answers_total; shmtool sees the same
# counts; nginx -t refuses cap= outside 1..15, on another variant or kind, and on
# another directive.
source "$(dirname "$0")/lib.sh"
require nginx nginx; require curl curl; require_built

seg=$(segment_name ngxcap)
port=$(free_port)
p=$(nginx_prefix cap)
HTTP="
    shmfilter_segment $seg create size=64m;
    shmfilter_structure caps window variant=stamped expected=100000 retention=7 bucket=1d create;
    shmfilter_structure freq window variant=cuckoo expected=1000 create;
    shmfilter_structure pairs set capacity=1000 create;
    shmfilter_fail open;
    # at most 3 ads a week per (plan, device); a daily cap of 1 for plan 9's devices
    shmfilter_mark \$fcap   caps \$arg_device space=\$arg_plan cap=3 window=7;
    shmfilter_mark \$fcap1  caps \$arg_device space=\$arg_plan cap=1 window=1;
    shmfilter_seen \$fseen  caps \$arg_device space=\$arg_plan window=7;
    shmfilter_forget \$fforget caps \$arg_device space=\$arg_plan;
    server {
        listen 127.0.0.1:$port reuseport;
        location = /    { return 200 \"up\n\"; }
        location = /ad  { if (\$fcap = capped) { return 204; } return 200 \"\$arg_device \$fcap \$pid\n\"; }
        location = /cap { return 200 \"\$arg_device \$fcap \$pid\n\"; }
        location = /day { return 200 \"\$fcap1\n\"; }
        location = /seen { return 200 \"\$fseen\n\"; }
        location = /forget { shmfilter_answer \"\$fforget\n\"; }
        location = /status { shmfilter_status; }
    }"
nginx_conf "$p" 4 "$HTTP"
out=$(nginx_test_conf "$p") || fail "nginx -t rejected the good configuration: $out"
nginx_start "$p" "$port"
wait_workers "$p" 4
U="http://127.0.0.1:$port"

note "one device, one request at a time: 3 allowed, then capped"
for i in 1 2 3; do expect_eq "allowed $i" "$(get "$U/cap?plan=1&device=d0" | cut -d' ' -f2)" "allowed"; done
for i in 4 5; do expect_eq "capped $i" "$(get "$U/cap?plan=1&device=d0" | cut -d' ' -f2)" "capped"; done
expect_eq "if: capped is 204" "$(get -o /dev/null -w '%{http_code}' "$U/ad?plan=1&device=d0")" "204"
expect_eq "another plan counts apart" "$(get "$U/cap?plan=2&device=d0" | cut -d' ' -f2)" "allowed"
expect_eq "an allowed mark marks the pair" "$(get "$U/seen?plan=1&device=d0")" "seen"
expect_eq "daily cap 1: allowed" "$(get "$U/day?plan=9&device=d0")" "allowed"
expect_eq "daily cap 1: capped" "$(get "$U/day?plan=9&device=d0")" "capped"
expect_eq "no device: empty, nothing counted" "$(get "$U/cap?plan=1" | cut -d' ' -f2)" ""

note "40 devices x 12 requests each, 32 connections at once over 4 workers: exactly 3 allowed per device"
devices=40 per=12 cap=3
# a device's requests adjacent: the 32 in flight are ~3 devices' 12 requests each, racing
for d in $(seq "$devices"); do
  for r in $(seq "$per"); do echo "url = \"$U/cap?plan=7&device=race$d\""; done
done >"$T_DIR/race.curl"
get --parallel --parallel-max 32 -K "$T_DIR/race.curl" >"$T_DIR/race.out" || fail "curl --parallel batch failed"
lines=$(wc -l <"$T_DIR/race.out")
expect_eq "answers" "$lines" "$((devices * per))"
bad=$(awk '$2 != "allowed" && $2 != "capped"' "$T_DIR/race.out" | head -3)
[[ -z $bad ]] || fail "answers other than allowed/capped: $bad"
per_dev=$(awk '$2 == "allowed" { n[$1]++ } END { for (d in n) print n[d] }' "$T_DIR/race.out" | sort -u | tr '\n' ' ')
expect_eq "allowed per device (each of $devices devices, $per requests)" "$per_dev" "$cap "
allowed_devs=$(awk '$2 == "allowed" { print $1 }' "$T_DIR/race.out" | sort -u | wc -l)
expect_eq "devices with allowed answers" "$allowed_devs" "$devices"
pids=$(awk '{ print $3 }' "$T_DIR/race.out" | sort -u | wc -l)
[[ $pids -ge 2 ]] || fail "all $lines answers came from one worker: the race was not across processes"
multi=$(awk '{ w[$1 " " $3] = 1 } END { for (k in w) { split(k, a, " "); n[a[1]]++ } for (d in n) if (n[d] > 1) m++; print m + 0 }' "$T_DIR/race.out")
[[ $multi -ge 1 ]] || fail "no device was answered by two workers: the race was not across processes"
note "answered by $pids workers; $multi of $devices devices by more than one"
# the pairs stay capped for the rest of the week; shmtool (another process) counts the same marks
expect_eq "still capped" "$(get "$U/cap?plan=7&device=race1" | cut -d' ' -f2)" "capped"
out=$("$SHMF_SHMTOOL" window mark "$seg" caps 7 race2 7 race-new --cap 3 --window 7) || fail "shmtool window mark --cap failed: $out"
expect_eq "shmtool --cap on nginx's marks" "$out" "7 race2 capped
7 race-new allowed"
expect_eq "nginx after shmtool's mark" "$(get "$U/cap?plan=7&device=race-new" | cut -d' ' -f2)" "allowed"
lanes=$("$SHMF_SHMTOOL" window info "$seg" caps --json | sed -n 's/.*"lanes":\([0-9]*\).*/\1/p')
[[ ${lanes:-0} -ge $((devices * (cap + 1))) ]] || fail "window info shows lanes=${lanes:-?}, expected at least $((devices * (cap + 1)))"

note "forget clears the pair's own lane; its cap marks stay"
expect_eq "forget" "$(get "$U/forget?plan=1&device=d0")" "forgotten"
expect_eq "forgotten: unseen" "$(get "$U/seen?plan=1&device=d0")" "unseen"
expect_eq "still capped after forget" "$(get "$U/cap?plan=1&device=d0" | cut -d' ' -f2)" "capped"

note "status: the answers counted per worker"
get "$U/status" >"$T_DIR/status.txt"
sum() { awk -v a="$1" '$0 ~ "^shmfilter_answers_total\\{.*answer=\"" a "\"\\}" { s += $2 } END { print s + 0 }' "$T_DIR/status.txt"; }
# allowed: 3 + 1 (plan 2) + 1 (daily) + 40 x 3 + 1 (race-new); capped: 2 + 1 (/ad) + 1 (daily) + 40 x 9 + 1 + 1
expect_eq "allowed answers" "$(sum allowed)" "$((3 + 1 + 1 + devices * cap + 1))"
expect_eq "capped answers" "$(sum capped)" "$((2 + 1 + 1 + devices * (per - cap) + 1 + 1))"

note "nginx -t: cap= is checked at configuration time"
bad() { # bad WHAT EXPECTED_REGEX HTTP_BODY
  local q; q=$(nginx_prefix "bad$RANDOM")
  nginx_conf "$q" 1 "$3"
  local out
  if out=$(nginx_test_conf "$q"); then fail "nginx -t accepted a bad configuration ($1)"; fi
  grep -Eq "$2" <<<"$out" || fail "nginx -t error for $1 does not match /$2/: $out"
}
bad "cap=0" 'invalid cap=0: the marks a pair may have in the window, 1 to 15' \
  "shmfilter_segment $seg; shmfilter_mark \$a caps \$arg_d space=1 cap=0;"
bad "cap=16" 'invalid cap=16: the marks a pair may have in the window, 1 to 15' \
  "shmfilter_segment $seg; shmfilter_mark \$a caps \$arg_d space=1 cap=16;"
bad "cap=x" 'invalid cap=x' "shmfilter_segment $seg; shmfilter_mark \$a caps \$arg_d space=1 cap=x;"
bad "cap twice" 'takes cap= once' "shmfilter_segment $seg; shmfilter_mark \$a caps \$arg_d space=1 cap=2 cap=3;"
bad "cap on a cuckoo window" 'shmfilter_mark \$a .*cap= counts marks only in a window of variant=stamped; "freq" is a window of variant=cuckoo' \
  "shmfilter_segment $seg; shmfilter_mark \$a freq \$arg_d space=1 cap=3;"
bad "cap on a set" 'cap= counts marks only in a window of variant=stamped; "pairs" is a set' \
  "shmfilter_segment $seg; shmfilter_mark \$a pairs \$arg_d cap=3;"
bad "cap on seen" 'shmfilter_seen.*takes no cap= \(only shmfilter_mark caps marks\)' \
  "shmfilter_segment $seg; shmfilter_seen \$a caps \$arg_d space=1 cap=3;"
bad "cap window past the retention" 'window=8 is more than the retention of window "caps" \(7 buckets\)' \
  "shmfilter_segment $seg; shmfilter_mark \$a caps \$arg_d space=1 cap=3 window=8;"
bad "declared variant differs" 'declared variant=stamped, the window in segment "'"$seg"'" has variant=cuckoo' \
  "shmfilter_segment $seg; shmfilter_structure freq window variant=stamped; shmfilter_mark \$a freq \$arg_d space=1;"
bad "stamped retention 13" 'window "s13": variant=stamped keeps at most 12 buckets' \
  "shmfilter_segment $seg; shmfilter_structure s13 window variant=stamped expected=10 retention=13 create;"
echo "PASS nginx_cap"
