#!/usr/bin/env bash
# buf lint (STANDARD) of the stepcast.v1 API. buf comes from the npm registry (scripts/setup.sh
# installs it into build/tools).
set -eu
root="$1"; buf="$2"
[ -x "$buf" ] || { echo "buf not found at $buf: run scripts/setup.sh"; exit 1; }
cd "$root/proto" && "$buf" lint && echo "buf lint: stepcast.v1 is clean at STANDARD"
