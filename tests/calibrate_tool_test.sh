#!/usr/bin/env bash
# stepcast-calibrate as a user runs it here (no GPU): the no-GPU error path, and the collective
# sweep over 2 MPI ranks in host memory writing a profile that stepcast predict accepts.
set -u
cal="$1"; stepcast="$2"; root="$3"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "skip  no-GPU path (a GPU is present)"
else
  out=$("$cal" --quick 2>&1); rc=$?
  { [ $rc -eq 2 ] && grep -q "no usable CUDA device" <<<"$out"; } && echo "ok   no GPU: exit 2 with the reason" || { echo "FAIL no-GPU path ($rc): $out"; fail=1; }
fi
out=$("$cal" --gpus 0,x 2>&1); rc=$?
{ [ $rc -eq 1 ] && grep -q -- "--gpus: 'x' is not a GPU index" <<<"$out"; } && echo "ok   bad --gpus named" || { echo "FAIL bad --gpus ($rc): $out"; fail=1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(timeout 120 mpirun --oversubscribe -np 2 "$cal" --backend mpi --skip-gemm --skip-hbm --hardware h100-sxm --quick \
      --max-collective-bytes 1048576 --name cpu-test --out "$work/p.json" 2>&1); rc=$?
{ [ $rc -eq 0 ] && grep -q "ALL_REDUCE busbw x2" <<<"$out" && [ -s "$work/p.json" ] && [ -s "$work/p.json.run.json" ]; } \
  && echo "ok   mpirun -np 2 sweep wrote the profile and the run" || { echo "FAIL mpi sweep ($rc)"; echo "$out" | tail -20; fail=1; }
grep -q '"group_size": "2"' "$work/p.json" && echo "ok   measured collectives in the profile" || { echo "FAIL no measured collective"; fail=1; }
grep -q 'not measured; reference profile' "$work/p.json" && echo "ok   unmeasured rates marked as the reference's" || { echo "FAIL unmeasured rates not marked"; fail=1; }
out=$("$stepcast" predict "$root/examples/llama3-70b-h100.yaml" --profile "$work/p.json" 2>&1); rc=$?
{ [ $rc -eq 0 ] && grep -q "profile cpu-test" <<<"$out"; } && echo "ok   stepcast predict --profile uses it" || { echo "FAIL predict --profile ($rc): $out"; fail=1; }
# The service's PutProfile takes it, and a pre-flight check runs on it by name.
(cd "$work" && exec "$stepcast" serve --listen 127.0.0.1:0 --port-file "$work/port" --db "$work/s.db" >"$work/serve.log" 2>&1) &
spid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
addr="127.0.0.1:$(cat "$work/port" 2>/dev/null)"
put=$("$stepcast" profile put cpu-test "$work/p.json" --server "$addr" 2>&1); rc1=$?
pf=$("$stepcast" preflight "$root/examples/llama3-70b-h100.yaml" --server "$addr" --profile cpu-test --warn-only 2>&1); rc2=$?
kill $spid; wait $spid 2>/dev/null
{ [ $rc1 -eq 0 ] && grep -q "stored cpu-test version 1" <<<"$put" && [ $rc2 -eq 0 ] && grep -q "cpu-test" <<<"$pf"; } \
  && echo "ok   PutProfile stores it; preflight --profile uses it" || { echo "FAIL service ($rc1, $rc2): $put $pf"; cat "$work/serve.log"; fail=1; }
bash "$root/scripts/carry_calibrate.sh" "$(dirname "$cal")/.." "$work/carry" >/dev/null 2>&1; rc=$?
{ [ $rc -eq 0 ] && [ -x "$work/carry/bin/stepcast-calibrate" ] && ls "$work/carry/lib" | grep -q '^libprotobuf' \
  && ! ls "$work/carry/lib" | grep -Eq '^lib(cuda|cublasLt|nccl|c)\.so' \
  && [ "$(du -sm "$work/carry" | cut -f1)" -lt 64 ]; } \
  && echo "ok   carry bundle: binaries and non-CUDA libraries, under 64 MiB" || { echo "FAIL carry bundle ($rc)"; ls "$work/carry/lib"; fail=1; }
exit $fail
