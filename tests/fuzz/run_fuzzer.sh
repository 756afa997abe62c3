#!/usr/bin/env bash
# tests/fuzz/run_fuzzer.sh TARGET CORPUS_DIR SECONDS: runs one libFuzzer target for
# SECONDS on a scratch copy of its seed corpus (the repo's corpus is never written).
# Exits non-zero on a crash, sanitizer report, timeout (a hang: 10 s per input),
# leak or out-of-memory; the reproducer is kept and its path printed.
set -euo pipefail
target=$1 corpus=$2 seconds=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/shmf-fuzz-run-XXXXXX")
trap 'rm -rf "$work/corpus"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
[[ -d "$corpus" ]] && cp "$corpus"/* "$work/corpus/" 2>/dev/null || true
set +e
"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=1024 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" 2>&1 | tail -n 40
rc=${PIPESTATUS[0]}
set -e
if [[ $rc -ne 0 ]]; then
  echo "run_fuzzer: $(basename "$target") failed (exit $rc); reproducers kept in $work/artifacts:"
  ls -l "$work/artifacts"
  exit 1
fi
rm -rf "$work"
