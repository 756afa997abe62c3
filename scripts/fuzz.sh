#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [TARGET...]: builds the libFuzzer targets (clang-14,
# ASan+UBSan, build/fuzz) and runs each for SECONDS (default 600) on a scratch
# copy of its seed corpus, in parallel jobs (-fork) that keep going after a
# finding. Findings land in build/fuzz/findings/<target>/ (crash-*, timeout-*,
# oom-*); the corpus it grew in build/fuzz/corpus/<target>/. Exit 1 if any
# target found something. CI runs the same targets briefly (scripts/test.sh, phase fuzz).
#
#   ./scripts/fuzz.sh              # 10 minutes per target
#   ./scripts/fuzz.sh 3600 fuzz_segment
#
# Environment: JOBS (parallel fuzzing jobs per target, default 2), FUZZ_BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-600}
shift || true
JOBS=${JOBS:-2}
BUILD=${FUZZ_BUILD_DIR:-build/fuzz}
TARGETS=("$@")
# Default: every target, one per tests/fuzz/fuzz_*.cpp (tests/fuzz/CMakeLists.txt refuses a
# source that is not registered), so a new target cannot be left out of the long runs.
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  for src in tests/fuzz/fuzz_*.cpp; do TARGETS+=("$(basename "$src" .cpp)"); done
fi

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_C_COMPILER=clang-14 -DSHMFILTER_FUZZ=ON -DSHMFILTER_BUILD_TESTS=OFF -DSHMFILTER_BUILD_SHMTOOL=OFF \
  -DSHMFILTER_BUILD_EXAMPLES=OFF -DSHMFILTER_BUILD_BENCHMARKS=OFF -DSHMFILTER_KILL_POINTS=OFF >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}"

found=0
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$t" findings="$BUILD/findings/$t"
  mkdir -p "$corpus" "$findings"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  echo "==== $t: ${SECONDS_EACH}s, $JOBS jobs"
  set +e
  "$BUILD/tests/fuzz/$t" -fork="$JOBS" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=1024 \
    -artifact_prefix="$findings/" "$corpus" >"$findings/log.txt" 2>&1
  set -e
  grep -E '^#[0-9]+: cov' "$findings/log.txt" | tail -1 || true
  n=$(find "$findings" -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' | wc -l)
  if [[ $n -gt 0 ]]; then
    echo "$t: $n findings in $findings"
    found=1
  fi
done
exit $found
