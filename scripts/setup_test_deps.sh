#!/usr/bin/env bash
# Installs what only the test suite needs, so that the first README command stays quick for a
# newcomer: Debian's chromium (headless, for tests/pages_test.py, which renders every --html page)
# and a font for it to draw text with; Debian's PostgreSQL server, which tests/pg_server.sh starts
# in a temporary directory for the PostgreSQL store tests (the package's own cluster is not used). Idempotent; the README's test command and .ci/run call it
# after scripts/setup.sh.
#   scripts/setup_test_deps.sh            install what is missing (apt-get; sudo when not root)
#   scripts/setup_test_deps.sh --fuzz     also clang and libFuzzer, for scripts/fuzz_smoke.sh (CI)
#   STEPCAST_SKIP_APT=1 ...               do nothing (packages already present)
set -euo pipefail

TEST_PACKAGES=(
  chromium            # headless browser of the html_pages test (Debian 12: 1xx.x-1~deb12u1)
  fonts-dejavu-core   # the sans-serif the pages name; without a font chromium draws no text
  postgresql          # the server the PostgreSQL store tests start themselves (tests/pg_server.sh)
)
if [ "${1:-}" = "--fuzz" ]; then
  TEST_PACKAGES=(
    clang               # clang 14 on Debian 12: the fuzz build (fuzz/, scripts/fuzz_smoke.sh)
    libclang-rt-14-dev  # its compiler-rt: libFuzzer, ASan and UBSan runtimes
  )
fi

[ "${STEPCAST_SKIP_APT:-0}" = "1" ] && exit 0
missing=()
for p in "${TEST_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup_test_deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
