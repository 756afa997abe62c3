#!/usr/bin/env bash
# scripts/install-deps.sh: installs the Debian 12 packages shmfilter needs to
# build, test and run its demo, and nothing else. Quick when all are present
# (no apt step at all), so every script can call it first.
#
#   ./scripts/install-deps.sh          # as root on a fresh Debian 12 machine
#
# Exit 0 when everything is present afterwards; 1 when something is missing and
# this is not root (the message lists the command to run), or apt-get failed.
set -euo pipefail

PACKAGES=(
  cmake g++ make pkg-config   # toolchain
  libroaring-dev              # CRoaring (roaring::roaring)
  libxxhash-dev               # XXH3 (header-only use)
  libgtest-dev                # GoogleTest
  libbenchmark-dev            # Google Benchmark
  libhiredis-dev              # Redis client for the side-by-side benchmarks
  redis-server                # real Redis for the HLL interoperability test
  clang-14 libfuzzer-14-dev libclang-rt-14-dev  # libFuzzer + sanitizers (tests/fuzz, scripts/fuzz.sh)
  # the real servers of tests/servers (nginx module, Python binding, fleet)
  nginx nginx-dev             # Debian's nginx 1.22 and its module build kit
  libpcre2-dev libssl-dev zlib1g-dev  # what nginx's configure checks for the module build
  curl wrk procps             # functional and load clients; pgrep
  prometheus                  # promtool check metrics on the status endpoint
  python3 python3-pytest python3-gunicorn python3-redis
  python3-dev python3-venv python3-pip python3-numpy  # the Python package: its compiled module, pip install ./python, batches over numpy arrays
  help2man                    # shmtool's man page, generated from its --help (also: promtool above checks stats --prometheus)
  chromium                    # tests render shmtool advise's SVG headless (python3 above parses it)
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: not root; run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
