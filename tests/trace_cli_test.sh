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

# 1. The per-step breakdown, text and JSON (stepcast.v1.TraceReport).
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

# 2. Bad input: a clear error naming the file, exit 2.
head -c 100000 "$trace" > "$work/cut.json.gz"
out=$("$bin" trace "$work/cut.json.gz" 2>&1); rc=$?
{ [ $rc -eq 2 ] && grep -q "cut.json.gz" <<<"$out"; } && ok "truncated trace: exit 2, file named" || { bad "truncated ($rc)"; echo "$out"; }
out=$("$bin" trace "$work/none.json" 2>&1); rc=$?
[ $rc -eq 2 ] && ok "missing trace: exit 2" || { bad "missing ($rc)"; echo "$out"; }

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
assert r["measured_breakdown"]["gemm_s"] > 0.014
PY
exit $fail
