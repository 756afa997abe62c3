#!/usr/bin/env bash
# python/tests/venv_install.sh DIR: the package as a user installs it (docs/python.md,
# "Installing"), with no package index:
#   DIR/clean  python3 -m venv; pip install --no-index ./python; then, from outside the
#              repository, import shmfilter: the compiled binding, the bundled library,
#              the project's version, a window's mark_if_unseen across two processes;
#   DIR/site   the same with --system-site-packages (pytest, gunicorn and numpy are
#              Debian's): the venv the gunicorn tests run (tests.cmake).
# The library bundled is the build tree's (SHMFILTER_LIBRARY, set by ctest) through
# SHMFILTER_BUILD_LIBRARY, so no second CMake build runs here; without it the package
# builds its own (python/_build_backend/shmfilter_build.py), as on a fresh clone.
set -euo pipefail
DIR=$1
PY=${SHMF_PYTHON:-/usr/bin/python3}
SRC=${SHMF_SOURCE_DIR:?SHMF_SOURCE_DIR: the repository}
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ -x $PY ]] || fail "$PY not found: install Debian package python3 (scripts/install-deps.sh)"
"$PY" -c "import ensurepip" 2>/dev/null || fail "$PY has no venv/ensurepip: install Debian package python3-venv"
[[ -n ${SHMFILTER_LIBRARY:-} && -f $SHMFILTER_LIBRARY ]] &&
  export SHMFILTER_BUILD_LIBRARY=$SHMFILTER_LIBRARY
unset SHMFILTER_LIBRARY SHMFILTER_BINDING PYTHONPATH PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 SHMFILTER_REQUIRE_COMPILED=1
SEG="shmf-test-$$-venv"
trap 'rm -f /dev/shm/$SEG /dev/shm/$SEG.lock-*' EXIT
rm -rf "$DIR"
mkdir -p "$DIR"
cd "$DIR"  # outside the repository: nothing imports from the source tree
for v in clean site; do
  # the site venv uses Debian's pip (python3-pip, visible through the system site): one
  # ensurepip less
  opts=()
  [[ $v == site ]] && opts=(--system-site-packages --without-pip)
  "$PY" -m venv "${opts[@]}" "$DIR/$v" || fail "python3 -m venv failed: install Debian package python3-venv"
  "$DIR/$v/bin/python" -m pip install --no-index "$SRC/python" >"$DIR/$v-pip.log" 2>&1 ||
    { cat "$DIR/$v-pip.log"; fail "pip install --no-index ./python failed in the $v venv (log above)"; }
  echo "--- $v: $(grep -E 'Successfully installed|Created wheel' "$DIR/$v-pip.log" | tr '\n' ' ')"
done
"$DIR/clean/bin/python" - "$DIR/clean" "$SRC" "$SEG" <<'PYEOF'
import os, subprocess, sys
venv, src, seg_name = sys.argv[1:4]
src = os.path.join(src, "python")
import shmfilter
where = os.path.realpath(shmfilter.__file__)
assert where.startswith(os.path.realpath(venv) + os.sep), f"imported {where}, not the venv's package"
assert not where.startswith(os.path.realpath(src) + os.sep), where
assert shmfilter.BINDING == "compiled", (shmfilter.BINDING, shmfilter._NATIVE_WHY)
assert os.path.realpath(shmfilter.library_path).startswith(os.path.dirname(where)), shmfilter.library_path
assert shmfilter.__version__ == shmfilter.version(), (shmfilter.__version__, shmfilter.version())
assert os.path.exists(os.path.join(os.path.dirname(where), "py.typed"))
with shmfilter.Segment.create(seg_name, size=16 << 20) as seg, \
        seg.window("freq", create=True, expected_per_bucket=1000, variant="cuckoo", retention=7) as w:
    assert w.mark_if_unseen(42, "device-1") is True
    # another process of the same venv sees the pair (one segment, any process)
    code = ("import shmfilter, sys; s = shmfilter.Segment.open(sys.argv[1]); w = s.window('freq'); "
            "sys.exit(0 if w.mark_if_unseen(42, 'device-1') is False and w.mark_if_unseen(42, 'device-2') else 3)")
    subprocess.run([sys.executable, "-c", code, seg_name], check=True)
    assert w.seen(42, "device-2") is True
    try:
        seg.window("freq", variant="bloom", retention=3)
        raise AssertionError("a mismatched window opened")
    except shmfilter.OptionsMismatchError:
        pass
print(f"--- clean venv: shmfilter {shmfilter.__version__} from {where}, binding {shmfilter.BINDING}, "
      f"library {shmfilter.library_path}")
PYEOF
"$DIR/site/bin/python" -c "import shmfilter, pytest, gunicorn; assert shmfilter.BINDING == 'compiled'" ||
  fail "the site venv cannot import shmfilter, pytest and gunicorn (Debian python3-pytest, python3-gunicorn)"
echo "PASS: pip install --no-index ./python in a clean venv and a --system-site-packages venv"
