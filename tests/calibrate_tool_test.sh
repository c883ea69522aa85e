#!/usr/bin/env bash
# stepcast-calibrate as a user runs it here (no GPU): the no-GPU exit, `import` of the real
# nccl-tests logs into a profile `stepcast predict --profile` uses, unknown and truncated logs, the
# collective sweep over 2 MPI ranks in host memory (kept out of the profile), an injected failure
# on one rank that every rank reports (exit 4) and a hung rank that ends the job within the
# timeout (no hang), the flow under mpirun with fake GPUs (every rank's samples gathered, the
# straggler named by rank, index and bus id), the service, and the carry bundle.
# Usage: calibrate_tool_test.sh STEPCAST_CALIBRATE STEPCAST ROOT FAKE_TOOL FAKE_NVML
set -u
cal="$1"; stepcast="$2"; root="$3"; fake="$4"; nvml="$5"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# 1. No GPU, bad options.
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "skip  no-GPU path (a GPU is present)"
else
  out=$("$cal" --quick 2>&1); rc=$?
  { [ $rc -eq 2 ] && grep -q "no usable CUDA device" <<<"$out"; } && ok "no GPU: exit 2 with the reason" || bad "no-GPU path ($rc): $out"
fi
out=$("$cal" --gpus 0,x 2>&1); rc=$?
{ [ $rc -eq 1 ] && grep -q -- "--gpus: 'x' is not a GPU index" <<<"$out"; } && ok "bad --gpus named (exit 1)" || bad "bad --gpus ($rc): $out"

# 2. import: the 16 real nccl-tests logs over the H100 reference, then stepcast predict --profile.
out=$("$cal" import "$root"/tests/data/real_data/microbench/nccl/*.txt --hardware h100-sxm --out "$work/x.json" 2>&1); rc=$?
{ [ $rc -eq 1 ] && grep -q "04_b200x16_lambda_ib_allreduce.txt: a nccl-tests log of .* (b200), but the profile is for h100-sxm" <<<"$out"; } \
  && ok "a log of another GPU refused naming both (exit 1)" || bad "other GPU ($rc): $out"
out=$("$cal" import "$root"/tests/data/real_data/microbench/nccl/*.txt --hardware h100-sxm --allow-other-gpu --out "$work/imp.json" --html "$work/imp.html" 2>&1); rc=$?
{ [ $rc -eq 0 ] && grep -q "all_reduce intra_node x8: 32 sizes" <<<"$out" && [ -s "$work/imp.json" ]; } \
  && ok "import of 16 nccl-tests logs" || bad "import ($rc): $out"
{ grep -q "<svg" "$work/imp.html" && grep -q "all_reduce" "$work/imp.html"; } && ok "import --html writes the calibration page" \
  || bad "import --html: no page"
out=$("$stepcast" predict "$root/examples/llama3-70b-h100.yaml" --profile "$work/imp.json" 2>&1); rc=$?
{ [ $rc -eq 0 ] && grep -q "h100-sxm-imported" <<<"$out"; } && ok "stepcast predict --profile uses the imported profile" \
  || bad "predict on the imported profile ($rc): $out"
out=$("$cal" import "$root"/tests/data/real_data/microbench/gemm/*.csv --hardware h100-sxm --base "$work/imp.json" --out "$work/imp2.json" 2>&1); rc=$?
{ [ $rc -eq 0 ] && grep -q "GEMM bf16: 55 shapes" <<<"$out"; } && ok "import updates a profile (--base) with 56 TraceLens GEMM shapes" \
  || bad "import --base ($rc): $out"
# What the base keeps (docs/CALIBRATION.md "Importing"): every collective entry of imp.json, its
# measured curves (entries with points) point for point; only the GEMM rates are new.
colls="[(c['collective'], c['scope'], c.get('group_size'), c.get('ranks_per_node'), [(p['size_bytes'], p['time_s']) for p in c.get('points', [])]) for c in d['collectives']]"
n1=$(json "$work/imp.json" "len(d['collectives']), sum(1 for c in d['collectives'] if len(c.get('points', [])) >= 2)")
n2=$(json "$work/imp2.json" "len(d['collectives']), sum(1 for c in d['collectives'] if len(c.get('points', [])) >= 2)")
{ [ -n "$n1" ] && [ "$n1" = "$n2" ] && [ "$(json "$work/imp.json" "$colls")" = "$(json "$work/imp2.json" "$colls")" ] \
  && python3 -c "import sys; n=eval(sys.argv[1]); sys.exit(0 if n[1] >= 7 else 1)" "$n1"; } \
  && ok "import --base keeps the base's $n1 (collectives, curves), point for point" \
  || bad "import --base: base (collectives, curves) $n1, after $n2"
printf 'hello\nnot a benchmark log\n' > "$work/notes.txt"
out=$("$cal" import "$work/notes.txt" --hardware h100-sxm --out "$work/x.json" 2>&1); rc=$?
{ [ $rc -eq 1 ] && grep -q "notes.txt:1: not a log of nccl-tests" <<<"$out"; } && ok "unknown log: exit 1 naming file and line" \
  || bad "unknown log ($rc): $out"
head -c 3000 "$root/tests/data/real_data/microbench/nccl/01_h100x8_nvlink_dgx_allreduce.txt" > "$work/cut_allreduce.txt"
out=$("$cal" import "$work/cut_allreduce.txt" --hardware h100-sxm --out "$work/x.json" 2>&1); rc=$?
{ [ $rc -eq 1 ] && grep -q "cut_allreduce.txt:[0-9]*: truncated nccl-tests row" <<<"$out"; } && ok "truncated log: exit 1 naming the line" \
  || bad "truncated log ($rc): $out"

# 3. mpirun -np 2, MPI's collectives in host memory: measured, kept in the run, not in the profile.
out=$(timeout 120 mpirun -np 2 "$cal" --backend mpi --skip-gemm --skip-hbm --hardware h100-sxm --quick \
      --max-collective-bytes 1048576 --name cpu-test --out "$work/p.json" 2>&1); rc=$?
{ [ $rc -eq 0 ] && grep -q "host MPI COLLECTIVE_ALL_REDUCE x2" <<<"$out" && [ -s "$work/p.json" ] && [ -s "$work/p.json.run.json" ]; } \
  && ok "mpirun -np 2 host sweep wrote the profile and the run" || { bad "mpi sweep ($rc)"; echo "$out" | tail -20; }
[ "$(json "$work/p.json.run.json" "sum(1 for c in d['collectives'] if c['backend']=='mpi-host')")" -gt 0 ] \
  && ok "host-memory samples in the run" || bad "no host samples in the run"
[ "$(json "$work/p.json" "sum(1 for c in d['collectives'] if 'reference profile' not in c['source'])")" = "0" ] \
  && ok "host-memory MPI rates kept out of the profile" || bad "host-memory MPI rates written as GPU collective rates"
grep -q 'not measured; reference profile' "$work/p.json" && ok "unmeasured rates marked as the reference's" || bad "unmeasured rates not marked"

# 4. An injected failure on rank 1: every rank reports it and exits 4, in bounded time.
t0=$(date +%s)
out=$(timeout 120 mpirun -np 2 "$cal" --backend mpi --skip-gemm --skip-hbm --hardware h100-sxm --quick \
      --max-collective-bytes 1048576 --out "$work/f.json" --inject-failure 1:collective:4096 2>&1); rc=$?
t1=$(date +%s)
{ [ $rc -eq 4 ] && grep -q "FAILED: collectives: rank 1: all_reduce at 4096 bytes: injected failure" <<<"$out" \
  && [ -s "$work/f.json.run.json" ] && [ $((t1 - t0)) -lt 60 ]; } \
  && ok "rank 1's failure agreed on every rank: exit 4 in $((t1 - t0)) s, results so far written" \
  || { bad "injected failure ($rc, $((t1 - t0)) s)"; echo "$out" | tail -20; }
# 5. A hung rank: the job ends (MPI_Abort) within the timeout, never hangs.
t0=$(date +%s)
out=$(timeout 120 mpirun -np 2 "$cal" --backend mpi --skip-gemm --skip-hbm --hardware h100-sxm --quick \
      --max-collective-bytes 1048576 --out "$work/h.json" --inject-failure 1:hang:4096 --timeout-s 3 2>&1); rc=$?
t1=$(date +%s)
{ [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "aborting the job" <<<"$out" && [ $((t1 - t0)) -lt 60 ]; } \
  && ok "a hung rank ends the job in $((t1 - t0)) s (exit $rc), no hang" || { bad "hung rank ($rc, $((t1 - t0)) s)"; echo "$out" | tail -20; }

# 6. The flow under mpirun with fake GPUs: rank 1's GPU 1 is 15% slow in GEMM; every rank's GEMM and
# HBM samples are gathered to rank 0; the straggler is named by rank, index and bus id.
out=$(STEPCAST_FAKE_GPUS=2 STEPCAST_FAKE_SLOW=1:1:0.85 timeout 120 mpirun -np 2 "$fake" --mpi --quick --warmup-s 0 \
      --max-collective-bytes 65536 --nvml-library "$nvml" --out "$work/fake.json" 2>&1); rc=$?
{ [ $rc -eq 0 ] && grep -q "STRAGGLER: GPU 1 (0000:28:00.0, GPU-00000001" <<<"$out"; } && ok "fake flow under mpirun: straggler named" \
  || { bad "fake flow under mpirun ($rc)"; echo "$out" | tail -20; }
[ "$(json "$work/fake.json.run.json" "sorted(set(s['gpu_id']['rank'] for s in d['gemm']))")" = "[0, 1]" ] \
  && ok "every rank's GEMM samples gathered to rank 0" || bad "GEMM samples of rank 1 missing"
[ "$(json "$work/fake.json.run.json" "sorted(set(s['gpu_id']['rank'] for s in d['hbm']))")" = "[0, 1]" ] \
  && ok "every rank's HBM samples gathered to rank 0" || bad "HBM samples of rank 1 missing"
grep -q '"group_size": "2"' "$work/fake.json" && ok "the ranks' collective curve in the profile" || bad "no x2 collective curve"
out=$(timeout 120 mpirun -np 2 "$fake" --mpi --quick --warmup-s 0 --skip-collectives --out "$work/l.json" \
      --inject-failure 1:list 2>&1); rc=$?
{ [ $rc -eq 2 ] && grep -q "rank 1: no usable CUDA device" <<<"$out"; } && ok "no GPU on one rank: exit 2 on every rank, rank named" \
  || { bad "no GPU on rank 1 ($rc)"; echo "$out" | tail -5; }
out=$("$stepcast" predict "$root/examples/llama3-70b-h100.yaml" --profile "$work/fake.json" 2>&1); rc=$?
{ [ $rc -eq 0 ] && grep -q "profile" <<<"$out"; } && ok "stepcast predict --profile uses a measured profile" || bad "predict ($rc): $out"
json "$work/fake.json" "(d['format_version'], d['provenance']['tool'], d['provenance']['gpu_count'], d['gemm_origins'][0])" \
  | grep -q "(2, 'stepcast-calibrate', '2', 'RATE_ORIGIN_MEASURED')" && ok "measured profile: schema 2, provenance, origins" \
  || bad "measured profile provenance: $(json "$work/fake.json" "d.get('provenance')")"
# gpu code review 2, N7: a run over 2 hosts (made up by the module's test hook) x 2 ranks measures
# the intra-node curve of each host (x2, the slowest host) beside the inter-node one (x4, 2 per node).
out=$(STEPCAST_CALIBRATE_TEST_HOSTS=2 STEPCAST_FAKE_GPUS=2 timeout 120 mpirun -np 4 "$fake" --mpi --quick --warmup-s 0 \
      --skip-gemm --skip-hbm --max-collective-bytes 65536 --out "$work/nodes.json" 2>&1); rc=$?
curves=$(json "$work/nodes.json" "sorted((c['scope'], c['group_size'], c['ranks_per_node']) for c, o in zip(d['collectives'], d['collective_origins']) if c['collective']=='COLLECTIVE_ALL_REDUCE' and 'RATE_ORIGIN_MEASURED' in o['points'])" 2>&1)
{ [ $rc -eq 0 ] && [ "$curves" = "[('SCOPE_INTER_NODE', '4', '2'), ('SCOPE_INTRA_NODE', '2', '0')]" ]; } \
  && ok "2 nodes x 2 ranks: intra-node x2 and inter-node x4 curves measured" || { bad "multi-node curves ($rc): $curves"; echo "$out" | tail -5; }
# gpu code review 2, N6: rank 0 cannot write its checkpoint; every rank ends with exit 5 at once
# (before: rank 0 alone in finish(), the others into the next part: exit 6 at the 2 x --timeout-s abort).
t0=$(date +%s)
out=$(timeout 120 mpirun -np 2 "$fake" --mpi --quick --warmup-s 0 --skip-collectives --timeout-s 30 \
      --out "$work/no_such_dir/w.json" 2>&1); rc=$?
t1=$(date +%s)
{ [ $rc -eq 5 ] && grep -q "cannot write" <<<"$out" && [ $((t1 - t0)) -lt 30 ]; } \
  && ok "rank 0's write failure agreed: exit 5 on every rank in $((t1 - t0)) s" || { bad "write failure under mpirun ($rc, $((t1 - t0)) s)"; echo "$out" | tail -5; }
# N14: two ranks on a host with one GPU are refused (before: both took GPU 0, exit 0).
out=$(STEPCAST_FAKE_GPUS=1 timeout 120 mpirun -np 2 "$fake" --mpi --quick --warmup-s 0 --skip-collectives \
      --out "$work/two.json" 2>&1); rc=$?
{ [ $rc -eq 1 ] && grep -q "2 ranks on .* but 1 visible GPUs: --mpi takes one GPU per rank" <<<"$out"; } \
  && ok "more ranks than GPUs on a host: exit 1, said" || { bad "ranks > GPUs ($rc)"; echo "$out" | tail -5; }
# gpu code review 2, N1 end to end: a 256 MiB-2 GiB H100 log (n05) leaves the TP 8 job's step time
# the reference's (before: 17.52 s -> 20.20 s, +15%).
sed -e 's/tp: 4/tp: 8/' -e 's/sequence_parallel: true/sequence_parallel: false/' "$root/examples/llama3-70b-h100.yaml" > "$work/tp8.yaml"
"$cal" import "$root/tests/data/real_data/microbench/logs_2026_11_27/n05_h100x8_nvlink_allreduce_256M_2G.txt" \
  --hardware h100-sxm --out "$work/n05.json" >/dev/null 2>&1
ref=$("$stepcast" predict "$work/tp8.yaml" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['step_time_s'])")
imp=$("$stepcast" predict "$work/tp8.yaml" --profile "$work/n05.json" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['step_time_s'])")
python3 -c "import sys; r,i=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(i/r-1) < 0.005 else 1)" "$ref" "$imp" \
  && ok "partial-range import: TP 8 step time $imp s vs the reference's $ref s" || bad "partial-range import moved the step time: $imp vs $ref"

# 7. The service's PutProfile takes it, and a pre-flight check runs on it by name.
(cd "$work" && exec "$stepcast" serve --listen 127.0.0.1:0 --port-file "$work/port" --db "$work/s.db" >"$work/serve.log" 2>&1) &
spid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
addr="127.0.0.1:$(cat "$work/port" 2>/dev/null)"
put=$("$stepcast" profile put cpu-test "$work/p.json" --server "$addr" 2>&1); rc1=$?
pf=$("$stepcast" preflight "$root/examples/llama3-70b-h100.yaml" --server "$addr" --profile cpu-test --warn-only 2>&1); rc2=$?
kill $spid; wait $spid 2>/dev/null
{ [ $rc1 -eq 0 ] && grep -q "stored cpu-test version 1" <<<"$put" && [ $rc2 -eq 0 ] && grep -q "cpu-test" <<<"$pf"; } \
  && ok "PutProfile stores it; preflight --profile uses it" || { bad "service ($rc1, $rc2): $put $pf"; cat "$work/serve.log"; }

# 8. The carry bundle: under 64 MiB; NCCL and MPI not linked into stepcast-calibrate.
bash "$root/scripts/carry_calibrate.sh" "$(dirname "$cal")/.." "$work/carry" >"$work/carry.log" 2>&1; rc=$?
size=$(du -sm "$work/carry" | cut -f1)
{ [ $rc -eq 0 ] && [ -x "$work/carry/bin/stepcast-calibrate" ] && ls "$work/carry/lib" | grep -q '^libprotobuf' \
  && ! ls "$work/carry/lib" | grep -Eq '^lib(cuda|cublasLt|nccl|c)\.so' && [ "$size" -lt 64 ]; } \
  && ok "carry bundle: $size MiB, binaries and non-CUDA libraries" || { bad "carry bundle ($rc, $size MiB)"; cat "$work/carry.log"; ls "$work/carry/lib"; }
ldd "$cal" | grep -Eq 'libnccl|libmpi' && bad "stepcast-calibrate links NCCL or MPI" || ok "stepcast-calibrate links neither NCCL nor MPI (loaded at run time)"
exit $fail
