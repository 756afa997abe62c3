#!/usr/bin/env bash
# scripts/test.sh: the whole test suite, as CI runs it (.ci/run calls this).
#
#   ./scripts/test.sh
#
# Phases (each timed):
#   1. deps     scripts/install-deps.sh (quick when everything is present)
#   2. build    RelWithDebInfo (line tables only: -g1), kill points on, in build/ci: the library, shmtool, every
#               test program, the examples ctest runs, the nginx module (no benchmarks:
#               ctest runs none of them; scripts/bench.sh builds its own tree)
#   3. test     ctest --output-on-failure -j2: every test
#   4. asan     one clang-14 tree in build/san serves phases 4 and 5: the library and
#               shmtool built once with ASan+UBSan (and libFuzzer's coverage hooks), the
#               multi-process and crash test programs (ctest label "multiprocess"),
#               then ctest -L multiprocess
#   5. fuzz     the libFuzzer targets of tests/fuzz in the same tree, and ctest -L fuzz
#               two at a time: each target for FUZZ_SECONDS (default 25) on its seed
#               corpus; fails on any crash, hang, sanitizer report or leak
# A redis-server is started on a free loopback port for the Redis
# interoperability tests (SHMF_REDIS_HOST / SHMF_REDIS_PORT) and stopped at exit.
#
# Environment: JOBS (default 2), BUILD_DIR (build/ci), SAN_BUILD_DIR (build/san),
# FUZZ_SECONDS (25 per target),
# SHMF_SKIP_ASAN=1 skips phase 4, SHMF_SKIP_FUZZ=1 phase 5 (quick local runs; CI never sets them).
# Exits non-zero on the first failing phase.
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-2}
BUILD_DIR=${BUILD_DIR:-build/ci}
SAN_BUILD_DIR=${SAN_BUILD_DIR:-build/san}
FUZZ_SECONDS=${FUZZ_SECONDS:-25}
# Test trees carry line tables only (-g1): backtraces and sanitizer reports keep their
# file:line, and the test programs compile in 25-30% less time than with full -g.
OPT_FLAGS=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")

T0=$SECONDS
declare -a TIMINGS=()
phase_start() { PHASE=$1; PHASE_T0=$SECONDS; echo; echo "==== [$PHASE] $2"; }
phase_end() {
  local dt=$((SECONDS - PHASE_T0))
  TIMINGS+=("$(printf '%-8s %4ds' "$PHASE" "$dt")")
  echo "==== [$PHASE] done in ${dt}s"
}
summary() {
  local rc=$?
  echo
  echo "==== timing per phase"
  for t in "${TIMINGS[@]}"; do echo "  $t"; done
  echo "  total    $((SECONDS - T0))s"
  if [[ $rc -ne 0 ]]; then echo "==== FAILED in phase [${PHASE:-?}] (exit $rc)"; else echo "==== ALL PASSED"; fi
  stop_redis
  rm -f "${SHM_MARKER:-}"
  exit $rc
}

REDIS_PID=""
REDIS_DIR=""
start_redis() {
  command -v redis-server >/dev/null || { echo "test.sh: redis-server not found" >&2; return 1; }
  REDIS_DIR=$(mktemp -d /tmp/shmf-redis-XXXXXX)
  local port tries
  for tries in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + RANDOM % 20000))
    # Something already listens there: try another port.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
    redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
      --dir "$REDIS_DIR" --daemonize no --loglevel warning >"$REDIS_DIR/log" 2>&1 &
    REDIS_PID=$!
    for _ in $(seq 50); do
      if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
        export SHMF_REDIS_HOST=127.0.0.1 SHMF_REDIS_PORT=$port
        echo "test.sh: redis-server pid $REDIS_PID on 127.0.0.1:$port"
        return 0
      fi
      kill -0 "$REDIS_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=""
  done
  echo "test.sh: could not start redis-server (log: $REDIS_DIR/log)" >&2
  return 1
}
stop_redis() {
  if [[ -n "$REDIS_PID" ]]; then
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=""
  fi
  if [[ -n "$REDIS_DIR" ]]; then rm -rf "$REDIS_DIR"; REDIS_DIR=""; fi
}
trap summary EXIT

phase_start deps "installing missing Debian packages"
./scripts/install-deps.sh
phase_end

phase_start build "RelWithDebInfo, kill points on, in $BUILD_DIR (-j$JOBS)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${OPT_FLAGS[@]}" -DSHMFILTER_KILL_POINTS=ON \
  -DSHMFILTER_BUILD_TESTS=ON -DSHMFILTER_BUILD_EXAMPLES=ON -DSHMFILTER_BUILD_BENCHMARKS=OFF
cmake --build "$BUILD_DIR" -j"$JOBS"
phase_end

# Tests must clean up after themselves: objects they leave in /dev/shm are listed.
SHM_MARKER=$(mktemp /tmp/shmf-test-marker-XXXXXX)
report_leftovers() {
  local left
  left=$(find /dev/shm -maxdepth 1 -name 'shmf-*' ! -name 'shmf-bench-*' -newer "$SHM_MARKER" 2>/dev/null | head -20 || true)
  if [[ -n "$left" ]]; then
    echo "test.sh: WARNING: tests left these objects in /dev/shm (a test does not clean up):"
    echo "$left" | sed 's/^/  /'
  fi
}

phase_start test "ctest --output-on-failure -j$JOBS (the whole suite)"
start_redis
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS"
report_leftovers
phase_end

# Phases 4 and 5 share one clang-14 tree: the library, shmtool and the test programs
# compiled with -fsanitize=fuzzer-no-link,address,undefined (SHMFILTER_FUZZ), linked
# with ASan+UBSan; only the libFuzzer targets link libFuzzer (tests/fuzz).
configure_san() {
  cmake -S . -B "$SAN_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${OPT_FLAGS[@]}" -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_C_COMPILER=clang-14 -DSHMFILTER_FUZZ=ON -DSHMFILTER_FUZZ_SECONDS="$FUZZ_SECONDS" \
    -DSHMFILTER_KILL_POINTS=ON -DSHMFILTER_BUILD_TESTS=ON -DSHMFILTER_BUILD_SHMTOOL=ON \
    -DSHMFILTER_BUILD_EXAMPLES=OFF -DSHMFILTER_BUILD_BENCHMARKS=OFF -DSHMFILTER_BUILD_NGINX=OFF
}

if [[ "${SHMF_SKIP_ASAN:-0}" != 1 ]]; then
  phase_start asan "ASan+UBSan (clang-14) build of the multi-process/crash tests in $SAN_BUILD_DIR, ctest -L multiprocess"
  configure_san
  # shmf_multiprocess_tests (tests/CMakeLists.txt) depends on every program labelled "multiprocess".
  cmake --build "$SAN_BUILD_DIR" -j"$JOBS" --target shmf_multiprocess_tests
  # Only the labelled programs were built: ctest -L multiprocess selects exactly them.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    ctest --test-dir "$SAN_BUILD_DIR" --output-on-failure -j"$JOBS" -L multiprocess
  report_leftovers
  phase_end
fi

if [[ "${SHMF_SKIP_FUZZ:-0}" != 1 ]]; then
  phase_start fuzz "libFuzzer targets (clang-14, ASan+UBSan) in $SAN_BUILD_DIR, ${FUZZ_SECONDS}s each, ctest -L fuzz -j$JOBS"
  configure_san
  # shmf_fuzz_targets (tests/fuzz) depends on every target; the library is already built.
  cmake --build "$SAN_BUILD_DIR" -j"$JOBS" --target shmf_fuzz_targets
  # JOBS targets at a time, one core each: every target still runs its full FUZZ_SECONDS.
  ctest --test-dir "$SAN_BUILD_DIR" --output-on-failure -j"$JOBS" -L fuzz
  phase_end
fi
