#!/usr/bin/env bash
# The Python client as a user installs it (the README's three lines): a fresh virtual
# environment over Debian's python3 with its system site packages (python3-grpcio,
# python3-protobuf), `pip install --no-build-isolation ./plugin/python` with no download, the
# import from outside the source tree, then predict and pre-flight against a live
# `stepcast serve` (tests/python_package_test.py). Also: pip's error when the stubs were not
# generated, and the import error naming the missing package.
#   python_package_test.sh SOURCE_DIR    (STEPCAST=the binary)
set -u
root="$1"; bin="${STEPCAST:?}"
py=/usr/bin/python3
work=$(mktemp -d); fail=0
cleanup() { [ -n "${pid:-}" ] && { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$work"; }
trap cleanup EXIT
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

# 1. The README's lines: venv, install, import.
"$py" -m venv --system-site-packages "$work/venv" >"$work/venv.log" 2>&1 \
  && ok "venv with system site packages" || { bad "venv"; cat "$work/venv.log"; exit 1; }
(cd "$root" && timeout 300 "$work/venv/bin/pip" install --no-build-isolation ./plugin/python) >"$work/pip.log" 2>&1 \
  && ok "pip install --no-build-isolation ./plugin/python" || { bad "pip install"; cat "$work/pip.log"; exit 1; }
grep -qi "downloading" "$work/pip.log" && bad "pip downloaded something" || ok "nothing downloaded"
out=$(cd "$work" && "$work/venv/bin/python" -c "import stepcast_client; print(stepcast_client.__file__)" 2>&1)
[[ "$out" == "$work/venv/"* ]] && ok "import stepcast_client from the venv" || bad "import: $out"
"$work/venv/bin/pip" show stepcast-client 2>/dev/null | grep -q "^Name: stepcast-client" \
  && ok "distribution named stepcast-client" || bad "pip show stepcast-client"

# 2. Without the generated stubs pip stops and says how to make them (a copy without _proto).
cp -r "$root/plugin/python" "$work/nostubs"
rm -rf "$work/nostubs/stepcast_client/_proto" "$work/nostubs/build" "$work/nostubs/"*.egg-info
"$work/venv/bin/pip" install --no-build-isolation "$work/nostubs" >"$work/pip2.log" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "generated gRPC stubs are missing" "$work/pip2.log" \
  && ok "missing stubs: pip fails naming them" || { bad "missing stubs ($rc)"; tail -20 "$work/pip2.log"; }

# 3. A Python without grpcio: the import error names the package. (-S: no site packages, so
# neither Debian's grpcio nor protobuf; only the installed package on the path.)
site=$("$work/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
out=$(cd "$work" && "$py" -S -c "import sys; sys.path.insert(0, '$site'); import stepcast_client" 2>&1)
grep -q "needs the 'grpcio' package" <<<"$out" && ok "no grpcio: error names it" || { bad "no grpcio error"; echo "$out"; }

# 4. Against a live server: tests/python_package_test.py with the venv's python.
echo "secret-token" > "$work/token"
(cd "$work" && exec "$bin" serve --listen 127.0.0.1:0 --port-file "$work/port" --token-file "$work/token" --quiet \
   >"$work/serve.log" 2>&1) &
pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { bad "server did not start"; cat "$work/serve.log"; exit 1; }
(cd "$work" && STEPCAST_SERVER="127.0.0.1:$(cat "$work/port")" STEPCAST_TOKEN=secret-token STEPCAST_ROOT="$root" \
   STEPCAST_BIN="$bin" timeout 180 "$work/venv/bin/python" "$root/tests/python_package_test.py" -v) \
  >"$work/py.log" 2>&1 && ok "predict and pre-flight through the installed package" \
  || { bad "installed package against the server"; cat "$work/py.log"; }
exit $fail
