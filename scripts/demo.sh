#!/usr/bin/env bash
# scripts/demo.sh: installs what is missing, builds the demo and shmtool
# (Release, in build/demo) and runs the demo. Arguments go to the demo:
#
#   ./scripts/demo.sh                       # 4 workers, default scale
#   ./scripts/demo.sh --workers 8 --scale 0.05 --keep
#
# See ./build/demo/examples/demo --help for every option.
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-2}
BUILD_DIR=${BUILD_DIR:-build/demo}

./scripts/install-deps.sh
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSHMFILTER_KILL_POINTS=OFF \
  -DSHMFILTER_BUILD_TESTS=OFF -DSHMFILTER_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target demo shmtool
echo
exec "$BUILD_DIR/examples/demo" --shmtool "$BUILD_DIR/shmtool/shmtool" "$@"
