#!/usr/bin/env bash
# scripts/build-nginx-module.sh: builds nginx/ngx_http_shmfilter_module.so,
# binary-compatible with Debian's packaged nginx (load_module accepts it).
#
#   ./scripts/build-nginx-module.sh [BUILD_DIR]     # default build/dev
#
# Needs Debian's nginx-dev: /usr/share/nginx/src holds nginx's headers, its
# configure script and conf_flags, the exact configure flags the packaged
# binary was built with (--with-compat among them, which fixes the module
# signature). The module links BUILD_DIR/shared/libshmfilter.so (CMake target
# shmfilter_shared, built here when missing) with an rpath to it.
# Output: BUILD_DIR/nginx/ngx_http_shmfilter_module.so. The CMake target
# nginx_module runs this script. Reconfigures only when the flags or
# nginx/config change (configure takes ~20 s; the module itself ~2 s).
# Environment: NGX_SRC (default /usr/share/nginx/src), SHMFILTER_LIB_DIR
# (default BUILD_DIR/shared), JOBS (default 2).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${1:-build/dev}
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
NGX_SRC=${NGX_SRC:-/usr/share/nginx/src}
LIB_DIR=${SHMFILTER_LIB_DIR:-$BUILD_DIR/shared}
OUT=$BUILD_DIR/nginx
WORK=$OUT/nginx-src

if [[ ! -f $NGX_SRC/conf_flags || ! -x $NGX_SRC/configure ]]; then
  echo "build-nginx-module: $NGX_SRC/conf_flags not found: install Debian's nginx-dev (apt-get install nginx-dev)" >&2
  exit 1
fi
if [[ ! -e $LIB_DIR/libshmfilter.so ]]; then
  if [[ -z ${SHMFILTER_LIB_DIR:-} ]]; then
    [[ -f $BUILD_DIR/CMakeCache.txt ]] || cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo
    cmake --build "$BUILD_DIR" -j"${JOBS:-2}" --target shmfilter_shared
  fi
  [[ -e $LIB_DIR/libshmfilter.so ]] || { echo "build-nginx-module: $LIB_DIR/libshmfilter.so missing" >&2; exit 1; }
fi

# shellcheck disable=SC1091
source "$NGX_SRC/conf_flags" # NGX_CONF_FLAGS=( ... )
# The compiler and linker flags of Debian's build (nginx -V); the module
# signature depends on NGX_CONF_FLAGS only, these keep the hardening alike.
CC_OPT="-g -O2 -fstack-protector-strong -Wformat -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2"
LD_OPT="-Wl,-z,relro -Wl,-z,now -fPIC"
export SHMFILTER_INCLUDE="$REPO/include"
export SHMFILTER_LIBS="-L$LIB_DIR -lshmfilter -Wl,-rpath,$LIB_DIR"

stamp=$( { cat "$NGX_SRC/conf_flags" "$REPO/nginx/config"; echo "$REPO $LIB_DIR $CC_OPT $LD_OPT"; } | sha256sum | cut -c1-16)
if [[ ! -f $WORK/objs/Makefile || "$(cat "$WORK/.shmf-stamp" 2>/dev/null)" != "$stamp" ]]; then
  rm -rf "$WORK"
  mkdir -p "$OUT"
  cp -a "$NGX_SRC" "$WORK"
  echo "build-nginx-module: configuring nginx $(nginx -v 2>&1 | sed 's/.*\///') module build in $WORK"
  if ! (cd "$WORK" && ./configure "${NGX_CONF_FLAGS[@]}" --with-cc-opt="$CC_OPT" --with-ld-opt="$LD_OPT" \
          --add-dynamic-module="$REPO/nginx" >"$WORK/configure.log" 2>&1); then
    tail -30 "$WORK/configure.log" >&2
    echo "build-nginx-module: nginx configure failed (log: $WORK/configure.log)" >&2
    exit 1
  fi
  echo "$stamp" >"$WORK/.shmf-stamp"
fi
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$WORK" -f objs/Makefile modules >"$WORK/make.log" 2>&1 || {
  cat "$WORK/make.log" >&2; echo "build-nginx-module: make modules failed" >&2; exit 1; }
grep -E "warning|error" "$WORK/make.log" >&2 || true
cp "$WORK/objs/ngx_http_shmfilter_module.so" "$OUT/ngx_http_shmfilter_module.so.tmp"
mv "$OUT/ngx_http_shmfilter_module.so.tmp" "$OUT/ngx_http_shmfilter_module.so"
echo "build-nginx-module: $OUT/ngx_http_shmfilter_module.so"
