#!/usr/bin/env bash
# tests/servers/nginx_docs.sh: every ```nginx block of docs/nginx.md runs as
# written. Only what ties a block to a host is replaced: the load_module path
# (the built module), error_log/access_log/pid (this test's prefix), `listen 80`
# (a free loopback port) and the segment's name (this test's). Each block
# passes `nginx -t`, starts, and answers: a first /ad goes to its upstream
# (none listens: 502), a second is capped (204), /capped says seen, and the
# /admin/ locations deny 127.0.0.1 (403). Then the prose's claim that `return`
# runs before `deny`: such a location answers 200 to a denied client.
source "$(dirname "$0")/lib.sh"
require nginx nginx; require curl curl; require_built

DOC=$SHMF_SOURCE_DIR/docs/nginx.md
"$PY" - "$DOC" "$T_DIR" <<'PYEOF' || fail "could not extract the nginx blocks of $DOC"
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"^```nginx\n(.*?)^```", text, re.S | re.M)
assert len(blocks) >= 2, f"{len(blocks)} nginx blocks in {sys.argv[1]}"
for i, b in enumerate(blocks):
    open(f"{sys.argv[2]}/block{i}.conf", "w").write(b)
print(len(blocks), "blocks")
PYEOF

n=0
for f in "$T_DIR"/block*.conf; do
  i=${f##*/block}; i=${i%.conf}
  seg=$(segment_name "doc$i")
  port=$(free_port)
  p=$(nginx_prefix "doc$i")
  # the path `cmake --install build/dev --prefix /usr/local` gives (nginx/CMakeLists.txt:
  # SHMFILTER_NGINX_MODULES_DIR, default ${CMAKE_INSTALL_LIBDIR}/nginx/modules)
  grep -q '^load_module /usr/local/lib/nginx/modules/ngx_http_shmfilter_module.so;' "$f" ||
    fail "block $i of docs/nginx.md does not load the installed module: $(grep '^load_module' "$f")"
  sed -e "s|^load_module [^;]*;|load_module $SHMF_NGINX_MODULE;|" \
      -e "s|^error_log [^ ;]*|error_log $p/error.log|" \
      -e "s|^pid [^;]*;|pid $p/nginx.pid;|" \
      -e "s|access_log /var/log/nginx/\([^ ;]*\)|access_log $p/logs/\1|" \
      -e "s|listen 80;|listen 127.0.0.1:$port;|" \
      -e "s|shmfilter_segment freqcap |shmfilter_segment $seg |" \
      "$f" >"$p/nginx.conf"
  # temp files of the prefix, not /var/lib/nginx (the http block's first line)
  sed -i "0,/^http {/s||http {\n    client_body_temp_path $p/tmp/body; proxy_temp_path $p/tmp/proxy;|" "$p/nginx.conf"
  if [[ $(id -u) -ne 0 ]]; then sed -i 's|^user .*;|# (not root: no user)|' "$p/nginx.conf"; fi
  note "docs/nginx.md block $i: nginx -t"
  out=$(nginx_test_conf "$p") || fail "nginx -t rejected block $i of docs/nginx.md as written: $out"
  T_NGINX_PREFIXES+=("$p")
  "$(command -v nginx)" -p "$p" -c "$p/nginx.conf" -e "$p/error.log" || fail "block $i did not start (see $p/error.log)"
  U="http://127.0.0.1:$port"
  for _ in $(seq 600); do curl -s -o /dev/null "$U/" 2>/dev/null && break; sleep 0.05; done
  note "block $i: requests"
  expect_eq "block $i: no plan or device" "$(get -o /dev/null -w '%{http_code}' "$U/ad")" "400"
  # first sight: proxied to the block's upstream (none listens here: 502; not capped)
  code=$(get -o /dev/null -w '%{http_code}' "$U/ad?plan=42&device=0123456789abcdef")
  [[ $code != 204 && $code != 400 ]] || fail "block $i: first sight answered $code"
  expect_eq "block $i: capped" "$(get -o /dev/null -w '%{http_code}' "$U/ad?plan=42&device=0123456789abcdef")" "204"
  case $(get "$U/capped?plan=42&device=0123456789abcdef") in
    seen|"seen seen") ;;
    *) fail "block $i: /capped answered '$(get "$U/capped?plan=42&device=0123456789abcdef")'" ;;
  esac
  expect_eq "block $i: /admin/ denies 127.0.0.1" \
    "$(get -o /dev/null -w '%{http_code}' -X POST "$U/admin/forget?plan=42&device=0123456789abcdef")" "403"
  expect_eq "block $i: /admin/metrics denied" "$(get -o /dev/null -w '%{http_code}' "$U/admin/metrics")" "403"
  expect_eq "block $i: still capped (the denied forget forgot nothing)" \
    "$(get -o /dev/null -w '%{http_code}' "$U/ad?plan=42&device=0123456789abcdef")" "204"
  kill -QUIT "$(cat "$p/nginx.pid")"
  n=$((n + 1))
done
[[ $n -ge 2 ]] || fail "ran $n blocks"

note "the prose: return runs before deny (a denied client gets 200, and the forget is done)"
seg=$(segment_name docret)
port=$(free_port)
p=$(nginx_prefix docret)
nginx_conf "$p" 1 "
    shmfilter_segment $seg create size=1m;
    shmfilter_structure pairs set capacity=100 create;
    shmfilter_mark   \$fc        pairs \$arg_device;
    shmfilter_forget \$fc_forget pairs \$arg_device;
    server {
        listen 127.0.0.1:$port;
        location = / { return 200 \"up\n\"; }
        location = /fc { return 200 \"\$fc\n\"; }
        location /admin/ { deny all; return 200 \"\$fc_forget\"; }
        location /admin2/ { deny all; shmfilter_answer \"\$fc_forget\"; }
    }"
nginx_start "$p" "$port"
U="http://127.0.0.1:$port"
expect_eq "mark" "$(get "$U/fc?device=d")" "new"
expect_eq "shmfilter_answer: denied" "$(get -o /dev/null -w '%{http_code}' "$U/admin2/x?device=d")" "403"
expect_eq "return before deny: 200 to the denied client" "$(get -w ' %{http_code}' "$U/admin/x?device=d")" "forgotten 200"
expect_eq "... and the forget was done" "$(get "$U/fc?device=d")" "new"
echo "PASS nginx_docs ($n blocks)"
