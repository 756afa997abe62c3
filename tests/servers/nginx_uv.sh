#!/usr/bin/env bash
# tests/servers/nginx_uv.sh: distinct devices per plan, today and over 7 days, through
# nginx (docs/nginx.md "Distinct devices per plan"): one UV family, `shmfilter_uv_add`
# and `shmfilter_count ... space= window=`, 2 workers. nginx runs on the system clock, so
# the six earlier days are written into the same family by shmtool with --now while nginx
# runs. Counts of at most 1,000 devices are exact, so those checks are equalities; the one
# plan of 1,200 devices (sparse registers) is held to 4 sigma of the HLL (3.25%).
source "$(dirname "$0")/lib.sh"
require nginx nginx; require curl curl; require_built

seg=$(segment_name ngxuv)
port=$(free_port)
p=$(nginx_prefix uv)
nginx_conf "$p" 2 "
    shmfilter_segment $seg create size=64m;
    shmfilter_structure uv uv retention=7 create;
    shmfilter_uv_add \$uv_add   uv space=\$arg_plan \$arg_device;
    shmfilter_count  \$uv_today uv space=\$arg_plan;
    shmfilter_count  \$uv_week  uv space=\$arg_plan window=7;
    shmfilter_count  \$uv_all   uv window=7;
    server {
        listen 127.0.0.1:$port;
        location = /add { return 200 \"\$uv_add\n\"; }
        location = /uv  { return 200 \"\$uv_today \$uv_week\n\"; }
        location = /all { return 200 \"\$uv_all\n\"; }
        location = /err { return 200 \"\$uv_add [\$shmfilter_error]\n\"; }
    }"
out=$(nginx_test_conf "$p") || fail "nginx -t: $out"
nginx_start "$p" "$port"
U="http://127.0.0.1:$port"

note "earlier days by shmtool (--now): plan 1 on days 1..6 ago, plan 3 three days ago"
now=$(date +%s)
for k in 1 2 3 4 5 6; do
  { for i in $(seq 0 19); do echo "1 day$k-$i"; done
    for i in $(seq 0 9); do echo "1 common-$i"; done
    [[ $k == 3 ]] && for i in $(seq 0 6); do echo "3 old-$i"; done
    true; } | "$SHMF_SHMTOOL" uv add "$seg" uv --now $((now - k * 86400)) >/dev/null ||
    fail "shmtool uv add for day -$k failed"
done

note "today through nginx: plan 1 (10 common + 30 new), plan 2 (5 devices, each twice)"
for i in $(seq 0 9); do expect_eq "plan 1 common-$i" "$(get "$U/add?plan=1&device=common-$i")" 1; done
for i in $(seq 0 29); do get "$U/add?plan=1&device=today-$i" >/dev/null; done
for i in $(seq 0 4); do
  expect_eq "plan 2 p2-$i first" "$(get "$U/add?plan=2&device=p2-$i")" 1
  expect_eq "plan 2 p2-$i again" "$(get "$U/add?plan=2&device=p2-$i")" 0
done

note "daily and 7-day counts (the union: common-* count once over the week)"
expect_eq "plan 1 today/week" "$(get "$U/uv?plan=1")" "40 160"
expect_eq "plan 2 today/week" "$(get "$U/uv?plan=2")" "5 5"
expect_eq "plan 3 today/week" "$(get "$U/uv?plan=3")" "0 7"
expect_eq "plan 9 (never seen)" "$(get "$U/uv?plan=9")" "0 0"
# every plan's devices over the week: 160 + 5 + 7 = 172 distinct items (an HLL estimate;
# at this size the registers' linear counting is within 2 of the truth)
all=$(get "$U/all")
[[ $all =~ ^[0-9]+$ ]] && (( all >= 170 && all <= 174 )) || fail "all plans over 7 days: $all, expected 172 +- 2"

note "a mid-size plan (1,200 devices: past exact, sparse registers) over 2 workers"
curl -sS --max-time 120 "$U/add?plan=4&device=m[1-1200]" >/dev/null || fail "curl range"
read -r today week <<<"$(get "$U/uv?plan=4")"
(( today >= 1161 && today <= 1239 )) || fail "plan 4 today: $today, expected 1,200 +- 3.25%"
expect_eq "plan 4 week = today (one day)" "$week" "$today"
"$SHMF_SHMTOOL" uv count "$seg" uv 4 >"$T_DIR/c4" || fail "shmtool uv count"
expect_eq "shmtool agrees with nginx" "$(cut -f2 "$T_DIR/c4")" "$today"

note "refusals: no plan, a bad plan, no device"
expect_eq "no plan" "$(get "$U/add?device=x")" ""
expect_eq "bad plan" "$(get "$U/add?plan=p1&device=x")" ""
expect_eq "no device" "$(get "$U/add?plan=1")" ""
"$SHMF_SHMTOOL" check "$seg" >/dev/null || fail "shmtool check: $("$SHMF_SHMTOOL" check "$seg" 2>&1)"

note "nginx -t errors"
bad() { # bad TEXT WANT: an http body that nginx -t refuses, naming WANT
  local q; q=$(nginx_prefix "bad$RANDOM")
  nginx_conf "$q" 1 "shmfilter_segment $seg; $1"
  out=$(nginx_test_conf "$q") && fail "nginx -t accepted: $1"
  [[ $out == *"$2"* ]] || fail "nginx -t for '$1' said: $out (expected: $2)"
}
bad 'shmfilter_uv_add $a uv $arg_device;' 'is a uv family: add space=VALUE'
bad 'shmfilter_count $a uv space=$arg_plan window=8;' 'window=8 is more than the retention of uv family "uv" (7 buckets)'
bad 'shmfilter_uv_add $a uv space=$arg_plan window=2 $arg_device;' 'takes no window='
bad 'shmfilter_mark $a uv $arg_device;' 'shmfilter_mark needs'
note "ok"
