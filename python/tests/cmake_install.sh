#!/usr/bin/env bash
# python/tests/cmake_install.sh BUILD PREFIX: `cmake --install BUILD --prefix PREFIX`
# installs the Python package too (python/CMakeLists.txt, SHMFILTER_PYTHON_INSTALL_DIR);
# Python imports it from there, outside the repository and the build tree, with the
# compiled binding and the library installed beside it under PREFIX.
set -euo pipefail
BUILD=$1 PREFIX=$2
PY=${SHMF_PYTHON:-/usr/bin/python3}
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(sed -n 's/^SHMFILTER_PYTHON_INSTALL_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
[[ -n $dir ]] || fail "$BUILD was configured without the compiled Python module (SHMFILTER_BUILD_PYTHON; Debian python3-dev)"
[[ $dir != /* ]] || fail "SHMFILTER_PYTHON_INSTALL_DIR=$dir is absolute: this test installs under a scratch prefix only"
rm -rf "$PREFIX"
# DESTDIR as well: a directory configured absolute (an nginx modules dir) lands under
# PREFIX too, never on the system
DESTDIR=$PREFIX/destdir cmake --install "$BUILD" --prefix "$PREFIX/usr" >"$PREFIX.log" 2>&1 ||
  { cat "$PREFIX.log"; fail "cmake --install failed"; }
dir=$PREFIX/destdir$PREFIX/usr/$dir
[[ -f $dir/shmfilter/__init__.py ]] || fail "cmake --install left no $dir/shmfilter/__init__.py"
unset SHMFILTER_LIBRARY SHMFILTER_BINDING
SEG="shmf-test-$$-cmake"
trap 'rm -f /dev/shm/$SEG /dev/shm/$SEG.lock-*; rm -rf "$PREFIX" "$PREFIX.log"' EXIT
cd /
PYTHONPATH=$dir "$PY" - "$PREFIX" "$SEG" <<'PYEOF'
import os, sys
prefix, seg_name = sys.argv[1:3]
import shmfilter
assert os.path.realpath(shmfilter.__file__).startswith(os.path.realpath(prefix) + os.sep), shmfilter.__file__
assert shmfilter.BINDING == "compiled", (shmfilter.BINDING, shmfilter._NATIVE_WHY)
assert os.path.realpath(shmfilter.library_path).startswith(os.path.realpath(prefix) + os.sep), shmfilter.library_path
assert shmfilter.__version__ == shmfilter.version()
with shmfilter.Segment.create(seg_name, size=16 << 20) as seg, \
        seg.window("w", create=True, expected_per_bucket=1000) as w:
    assert w.mark_if_unseen(1, "d") is True and w.mark_if_unseen(1, "d") is False
print(f"PASS: cmake --install: {shmfilter.__file__}, library {shmfilter.library_path}")
PYEOF
