#!/usr/bin/env bash
# `stepcast trace`, `stepcast compare PREDICTION TRACE` and `stepcast report --trace` as a user runs
# them, on a real Kineto trace (tests/data/real_data/traces). Every wait is bounded.
set -u
root="$1"; bin="${STEPCAST:?}"
trace="$root/tests/data/real_data/traces/hta/a100x8_rank3__trace_diff_control.json.gz"
work=$(mktemp -d); fail=0
cleanup() { [ -n "${pid:-}" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# 1. The per-step breakdown, text and JSON (stepcast.v1.TraceReport). The expected figures are the
# trace's entry in tests/data/real_data/traces/expected.json (an accounting independent of stepcast,
# and HolisticTraceAnalysis): per-step median 76.79 ms ("per_step_median_ms"."step"; 0.076786 s to
# the microsecond), communication/computation overlap 47.03% (HTA "comp_comm_overlap_pct").
out=$("$bin" trace "$trace"); rc=$?
{ [ $rc -eq 0 ] && grep -q "steps from ProfilerStep (launch correlation): 5" <<<"$out" && grep -q "median *76.79" <<<"$out"; } \
  && ok "trace prints 5 steps, median 76.79 ms" || { bad "trace ($rc)"; echo "$out"; }
"$bin" trace --json "$trace" > "$work/trace.json"; rc=$?
python3 - "$work/trace.json" <<'PY' && ok "trace --json is a TraceReport" || bad "trace --json"
import json, sys
r = json.load(open(sys.argv[1]))
s = r["ranks"][0]
assert s["rank"] == 3 and len(s["steps"]) == 5, s.keys()
assert abs(s["median"]["step_time_s"] - 0.076786) < 1e-6, s["median"]["step_time_s"]
assert abs(s["whole"]["comm_comp_overlap_pct"] - 47.03) < 0.05
assert r["merged"]["steps"], r["merged"].keys()
PY
out=$("$bin" trace --no-markers "$trace"); rc=$?
{ [ $rc -eq 0 ] && grep -q "steps from period:" <<<"$out"; } && ok "trace --no-markers finds the period" \
  || { bad "trace --no-markers ($rc)"; echo "$out"; }

# 1b. Eight ranks (the PARAM DLRM job): the communication wait for other ranks, text and JSON.
# Expected figures: tests/data/real_data/traces/straggler_reference.json (straggler_reaccount.py, an
# accounting independent of stepcast): slowest rank 7, the others waited 35552 us for it, critical
# lateness 11244 us; rank 1 waited 11125 us, mostly (9150 us) for rank 7.
dlrm=("$root"/tests/data/real_data/traces/param/param_dlrm_v100x8_rank*.json.gz)
out=$("$bin" trace "${dlrm[@]}"); rc=$?
{ [ $rc -eq 0 ] && grep -q "slowest rank: 7 (the others waited 35.55 ms for it in all)" <<<"$out" \
  && grep -q "step 0: critical lateness 11.24 ms over 8 collectives (mostly rank 7)" <<<"$out" \
  && grep -Eq "^ +1 +8 +11.34 +11.13 .*rank 7 \(9.15 ms\)" <<<"$out"; } \
  && ok "trace on 8 ranks: slowest rank 7, critical lateness 11.24 ms" || { bad "trace on 8 ranks ($rc)"; echo "$out"; }
"$bin" trace --json "${dlrm[@]}" > "$work/ranks.json"
python3 - "$work/ranks.json" <<'PY' && ok "trace --json carries the stragglers" || bad "trace --json stragglers"
import json, sys
w = json.load(open(sys.argv[1]))["stragglers"]
assert w["slowest_rank"] == 7 and w["collectives"] == 8, w
assert abs(w["steps"][0]["critical_lateness_s"] - 11244e-6) < 1e-12, w["steps"]
r1 = [r for r in w["ranks"] if r["rank"] == 1][0]
assert abs(r1["wait_for_other_ranks_s"] - 11125e-6) < 1e-12 and r1["mostly_waited_for_rank"] == 7, r1
PY

# 2. Bad input: a clear error naming the file, exit 2.
head -c 100000 "$trace" > "$work/cut.json.gz"
out=$("$bin" trace "$work/cut.json.gz" 2>&1); rc=$?
{ [ $rc -eq 2 ] && grep -q "cut.json.gz" <<<"$out"; } && ok "truncated trace: exit 2, file named" || { bad "truncated ($rc)"; echo "$out"; }
out=$("$bin" trace "$work/none.json" 2>&1); rc=$?
[ $rc -eq 2 ] && ok "missing trace: exit 2" || { bad "missing ($rc)"; echo "$out"; }

# 2b. Issue 24 / 26: a file with one ProfilerStep is one step; a FIFO or a bad option is refused.
out=$("$bin" trace "$root/tests/data/real_data/traces/tracelens/h100_bert-small_inference.json.gz"); rc=$?
{ [ $rc -eq 0 ] && grep -q "steps from one ProfilerStep (launch correlation): its first GPU record to the end of its last: 1" <<<"$out" \
  && grep -q "median *3.91" <<<"$out"; } && ok "one ProfilerStep: one step of 3.91 ms" || { bad "one ProfilerStep ($rc)"; echo "$out"; }
mkfifo "$work/fifo.json"
out=$(timeout 10 "$bin" trace "$work/fifo.json" 2>&1); rc=$?
{ [ $rc -eq 2 ] && grep -q "not a regular file" <<<"$out"; } && ok "FIFO refused, exit 2" || { bad "FIFO ($rc)"; echo "$out"; }
out=$("$bin" trace --contention --contention-key name "$trace" 2>&1); rc=$?
{ [ $rc -eq 2 ] && grep -q -- "--contention-key" <<<"$out"; } && ok "--contention-key name: exit 2" || { bad "contention key ($rc)"; echo "$out"; }

# 2c. --annotations: GPU time per user annotation, per instance (a synthetic two-layer trace); the
#     CPU time per range (100 / 50 us) and per GPU record launched in it (100 / 2, 50 / 1 us).
python3 - "$work/modules.json" <<'PY'
import json, sys
ev, c = [], 0
def rng(name, ts, dur, tid=1):
    ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur})
def k(name, launch, ts, dur, stream, tid=1):
    global c
    c += 1
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": launch, "dur": 1,
               "args": {"correlation": c}})
    ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
               "args": {"correlation": c, "stream": stream, "device": 0, "grid": [132, 1, 1], "block": [128, 1, 1]}})
rng("ProfilerStep#3", 0, 5000)
for layer in range(2):
    t = 2000 * layer
    rng("attn(F)", t, 100)
    k("sm90_xmma_gemm_bf16bf16_bf16f32", t + 10, t + 200, 300, 7)
    k("void flash_fwd_kernel<Flash_fwd_kernel_traits<128>>()", t + 20, t + 500, 200, 7)
    rng("dispatch(F)", t + 100, 50)
    k("void deep_ep::internode::dispatch<false, 8, false, 8>(int4*)", t + 110, t + 300, 600, 27)
json.dump({"traceEvents": ev}, open(sys.argv[1], "w"))
PY
out=$("$bin" trace --annotations "$work/modules.json"); rc=$?
{ [ $rc -eq 0 ] && grep -Eq "attn\(F\) +2 +0.300 +0.200 +0.000 +0.000 +0.000 +0.000 +0.500 +0.500 +0.400 +0.000 +0.100 +2.0 +50.0  7: 0.500" <<<"$out" \
  && grep -Eq "dispatch\(F\) +2 +0.000 +0.000 +0.000 +0.000 +0.000 +0.600 +0.600 +0.600 +0.000 +0.400 +0.050 +1.0 +50.0  27: 0.600" <<<"$out"; } \
  && ok "trace --annotations: per-instance ms per module" || { bad "annotations ($rc)"; echo "$out"; }
"$bin" trace --annotations --json "$work/modules.json" > "$work/modules_out.json" || bad "annotations --json"
python3 - "$work/modules_out.json" <<'PY' && ok "trace --annotations --json: AnnotationTime" || bad "annotations --json content"
import json, sys
a = {x["name"]: x for x in json.load(open(sys.argv[1]))["ranks"][0]["annotations"]}
assert a["attn(F)"]["instances"] == 2 and abs(a["attn(F)"]["gemm_s"] - 600e-6) < 1e-12, a["attn(F)"]
assert abs(a["dispatch(F)"]["communication_s"] - 1200e-6) < 1e-12
PY

# 2d. --contention on the A100x8 trace: GEMMs beside NCCL all-to-all (SendRecv) and all-reduce.
out=$("$bin" trace --contention "$trace"); rc=$?
{ [ $rc -eq 0 ] && grep -Eq "gemm +all_to_all +NVIDIA A100-PG509-200 +65 +21 +[0-9]+ +1.048" <<<"$out" \
  && grep -Eq "gemm +all_reduce +NVIDIA A100-PG509-200 +10 +5" <<<"$out"; } \
  && ok "trace --contention: GEMM alone vs beside NCCL" || { bad "contention ($rc)"; echo "$out"; }

# 3. compare: per term, the largest gap first; --json is a Comparison sorted by |difference|.
"$bin" predict --json "$root/examples/llama3-8b-hf.yaml" > "$work/pred.json" || bad "predict"
out=$("$bin" compare "$work/pred.json" "$trace"); rc=$?
{ [ $rc -eq 0 ] && grep -q "per term, largest gap first" <<<"$out" && grep -q "largest difference: gemm is" <<<"$out" \
  && grep -q "warning: measured MFU" <<<"$out"; } && ok "compare PREDICTION TRACE" || { bad "compare ($rc)"; echo "$out"; }
"$bin" compare --json "$work/pred.json" "$trace" > "$work/cmp.json" || bad "compare --json"
python3 - "$work/cmp.json" <<'PY' && ok "compare --json sorted by |difference|" || bad "compare --json"
import json, sys
c = json.load(open(sys.argv[1]))
d = [abs(t["difference_s"]) for t in c["terms"]]
assert d == sorted(d, reverse=True) and len(d) >= 4, d
assert c["measured_source"] == "trace" and c["measured_steps"] == 5
PY

# 4. report --trace stores the trace's median step with the run (ReportRun).
rm -f "$work/port"; echo "tok" > "$work/token"
(cd "$work" && exec "$bin" serve --listen 127.0.0.1:0 --port-file "$work/port" --token-file "$work/token" --quiet \
   >>"$work/serve.log" 2>&1) &
pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
addr="127.0.0.1:$(cat "$work/port" 2>/dev/null)"
# A job of the trace's scale (a 77 ms step on 8 A100): a ~125M-parameter GPT, 64 x 1024 tokens, about
# 26% MFU at that step (ReportRun refuses a step that implies more than 100%).
cat > "$work/small.yaml" <<'YAML'
name: gpt-125m-8xa100
model: {shape: {name: GPT 125M, layers: 12, hidden_size: 768, attention_heads: 12, ffn_hidden_size: 3072,
                vocab_size: 50304, ffn_type: gelu, norm_type: layernorm, tied_embeddings: true}}
hardware: a100-80gb
cluster: {gpu_count: 8}
training: {seq_length: 1024, global_batch_size: 64, micro_batch_size: 8}
YAML
out=$("$bin" report --server "$addr" --token-file "$work/token" --job "$work/small.yaml" \
      --trace "$trace" --json); rc=$?
printf '%s' "$out" > "$work/report.json"
python3 - "$work/report.json" <<'PY' && ok "report --trace stores the measured breakdown" || { bad "report --trace ($rc)"; echo "$out"; }
import json, sys
r = json.load(open(sys.argv[1]))["run"]
assert abs(r["measured_step_time_s"] - 0.076786) < 1e-6
assert r["labels"]["source"] == "kineto-trace"
assert abs(r["measured_breakdown"]["gemm_s"] - 0.013782) < 1e-6  # per_step_reaccounted.json: fbgemm is not GEMM
PY
exit $fail
