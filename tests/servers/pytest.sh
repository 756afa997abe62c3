#!/usr/bin/env bash
# tests/servers/pytest.sh FILE: runs one python/tests file with Debian's
# python3 and pytest; a missing interpreter or module fails naming the package.
set -euo pipefail
PY=${SHMF_PYTHON:-/usr/bin/python3}
[[ -x $PY ]] || { echo "FAIL: $PY not found: install Debian package python3 (scripts/install-deps.sh)" >&2; exit 1; }
"$PY" -c "import pytest" 2>/dev/null ||
  { echo "FAIL: $PY cannot import pytest: install Debian package python3-pytest (scripts/install-deps.sh)" >&2; exit 1; }
exec "$PY" -m pytest -q -p no:cacheprovider "$@"
