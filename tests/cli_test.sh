#!/usr/bin/env bash
# End-to-end checks of the stepcast command line, as a user runs it.
set -u
root="$1"
bin="${STEPCAST:?}"
fail=0
check() {  # check NAME EXPECTED_EXIT COMMAND...
  local name="$1" want="$2"; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then echo "FAIL $name: exit $rc, wanted $want"; echo "$out" | tail -5; fail=1; else echo "ok   $name"; fi
  LAST="$out"
}
contains() {
  if ! grep -qF -- "$2" <<<"$LAST"; then echo "FAIL $1: output lacks '$2'"; fail=1; else echo "ok   $1"; fi
}

check predict-example 0 "$bin" predict "$root/examples/llama3-70b-h100.yaml"
contains predict-has-breakdown "step breakdown"
contains predict-has-memory "memory per GPU"
contains predict-has-bottleneck "bottleneck"
check predict-json 0 "$bin" predict --json "$root/examples/llama3-70b-h100.yaml"
python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); assert d["step_time_s"]>0 and 0<d["mfu"]<1 and d["memory"]["total_bytes"]>0 and "gemm_s" in d["breakdown"]' <<<"$LAST" \
  && echo "ok   predict-json-parses" || { echo "FAIL predict-json-parses"; fail=1; }
check predict-hf-config 0 "$bin" predict "$root/examples/llama3-8b-hf.yaml"
contains predict-hf-name "llama3-8b-config"
check predict-textproto 0 "$bin" predict "$root/examples/deepseek-v3-gb200.textproto"
check predict-mfu 0 "$bin" predict --mfu 0.45 "$root/examples/llama3-70b-h100.yaml"
contains predict-mfu-says "assumed MFU 0.45"
check predict-missing-file 2 "$bin" predict /nonexistent.yaml
check predict-bad-mfu 2 "$bin" predict --mfu 2 "$root/examples/llama3-70b-h100.yaml"
tmp=$(mktemp -d)
printf 'model: llama3-8b\nhardware: h100-sxm\ncluster: {gpu_count: 12}\nparallelism: {tp: 3}\ntraining: {seq_length: 4096, global_batch_size: 8}\n' > "$tmp/bad.yaml"
check predict-bad-spec 2 "$bin" predict "$tmp/bad.yaml"
contains predict-bad-spec-names-field "parallelism.tp: 3 does not divide model attention_heads 32"
# A profile file replaces the reference profile.
"$bin" predict --json "$root/examples/llama3-70b-h100.yaml" >/dev/null
printf 'name: slow\ngemm: [{dtype: bf16, flops_per_s: 100e12}]\nhbm_bandwidth_bytes_per_s: 2e12\n' > "$tmp/slow.yaml"
check predict-profile 0 "$bin" predict "$root/examples/llama3-70b-h100.yaml" --profile "$tmp/slow.yaml"
contains predict-profile-named "profile slow"
check plan-seed000 0 "$bin" plan --target-tokens-per-s 2e5 --hardware h100-sxm,h200,l4
contains plan-has-l4 "L4-24GB"
check plan-budget 0 "$bin" plan --budget-usd 2e6 --days 30 --params 30e9 --tokens 600e9 --hardware h100-sxm --price 4
contains plan-budget-gpus "694"
check plan-nothing 2 "$bin" plan --hardware h100-sxm
check catalog 0 "$bin" catalog
contains catalog-lists-mi300x "MI300X"
if [ -f "$root/tests/data/validation/published_runs.csv" ]; then
  check validate 0 "$bin" validate "$root/tests/data/validation/published_runs.csv"
  contains validate-summary "all rows"
  check validate-json 0 "$bin" validate --json "$root/tests/data/validation/published_runs.csv"
  python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); assert d["summary"]["n_rows"]==26 and "error_pct" in d["rows"][0] and "median_abs_error_pct" in d["summary"]' <<<"$LAST" \
    && echo "ok   validate-json-parses" || { echo "FAIL validate-json-parses"; fail=1; }
fi
rm -rf "$tmp"
exit $fail
