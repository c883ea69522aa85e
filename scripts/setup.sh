#!/usr/bin/env bash
# Installs every Debian 12 package that stepcast's build and tests need, configures and builds.
# Idempotent: a second run only rebuilds what changed.
#   scripts/setup.sh            install + configure + build (Release) into build/
#   STEPCAST_SKIP_APT=1 ...     skip the apt-get step (packages already present)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  g++ cmake ninja-build pkg-config       # toolchain
  libabsl-dev                            # absl::Status / StatusOr
  libprotobuf-dev protobuf-compiler      # schemas, JSON and text-proto codecs
  libyaml-cpp-dev                        # YAML job files
  libcli11-dev                           # command-line parsing
  libgtest-dev libgmock-dev              # tests
  libbenchmark-dev                       # Google Benchmark
  libcsv-dev                             # CSV reader (stepcast validate)
  libtomlplusplus-dev                    # torchtitan TOML job configs
  rapidjson-dev zlib1g-dev               # streaming (SAX) reader of gzip Kineto traces (stepcast trace)
  libopenmpi-dev openmpi-bin             # calibration across nodes (and its mpirun -np 2 test)
  libgrpc++-dev protobuf-compiler-grpc   # the service (stepcast serve) and its clients
  libsqlite3-dev                         # the run and profile store
  libpq-dev                              # the PostgreSQL run store (several serve replicas): libpq
  libgoogle-perftools-dev                # tcmalloc_minimal, the allocator of stepcast and the benchmarks (STEPCAST_TCMALLOC)
  python3-grpcio python3-protobuf python3-yaml  # the Python client and its test
  python3-venv python3-pip python3-setuptools python3-wheel  # pip install ./plugin/python, offline
  python3                                # JSON checks in tests/cli_test.sh
  libslurm-dev                           # the SPANK plugin's headers
  slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins  # the single-host Slurm of the plugin test
)

if [ "${STEPCAST_SKIP_APT:-0}" != "1" ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # npm (for buf) ships with the machine's nodejs on some images; Debian's packages otherwise.
  command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# buf, for the lint of the stepcast.v1 API in the test suite (npm registry, pinned).
if [ ! -x build/tools/node_modules/.bin/buf ]; then
  mkdir -p build/tools
  (cd build/tools && npm install --silent --no-audit --no-fund @bufbuild/buf@1.75.0) ||
    echo "setup: could not install @bufbuild/buf; the buf lint test will fail" >&2
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${STEPCAST_BUILD_TYPE:-Release}" >/dev/null
cmake --build build -j"$(nproc)"
