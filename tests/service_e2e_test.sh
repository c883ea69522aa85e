#!/usr/bin/env bash
# `stepcast serve` as a launcher meets it: no-flag start, CLI preflight/report/runs, the Python
# client and launcher wrapper, graceful SIGTERM, and durability of an acknowledged report across
# kill -9. Every wait is bounded.
set -u
root="$1"; bin="${STEPCAST:?}"; pybuild="${STEPCAST_PYTHON:?}"
work=$(mktemp -d); fail=0
cleanup() { [ -n "${pid:-}" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
wait_port() {  # wait_port FILE: up to 10 s for the server's port file
  for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; return 1
}
start() {  # start [extra flags]
  rm -f "$work/port"
  (cd "$work" && exec "$bin" serve --listen 127.0.0.1:0 --port-file "$work/port" --token-file "$work/token" "$@" \
     >>"$work/serve.log" 2>&1) &
  pid=$!
  wait_port "$work/port" || { bad "server did not start"; cat "$work/serve.log"; exit 1; }
  addr="127.0.0.1:$(cat "$work/port")"
}
echo "secret-token" > "$work/token"

# 1. No flags besides a free port: built-in presets, SQLite file in the working directory.
start
[ -f "$work/stepcast.db" ] && ok "default store stepcast.db created" || bad "default store"

# 2. The CLI: pre-flight a Llama 3 70B job on H100s, report, list.
out=$("$bin" preflight "$root/examples/llama3-70b-h100.yaml" --server "$addr" --min-mfu 0.2); rc=$?
[ $rc -eq 0 ] && grep -q "PASS" <<<"$out" && ok "preflight PASS exit 0" || { bad "preflight PASS ($rc)"; echo "$out"; }
id=$(grep -o 'pred-[0-9a-f]*' <<<"$out" | head -1)
"$bin" preflight "$root/examples/llama3-70b-h100.yaml" --server "$addr" --min-mfu 0.95 >/dev/null; rc=$?
[ $rc -eq 4 ] && ok "preflight FAIL exit 4" || bad "preflight FAIL exit ($rc)"
"$bin" preflight "$root/examples/llama3-70b-h100.yaml" --server "$addr" --min-mfu 0.95 --warn-only >/dev/null; rc=$?
[ $rc -eq 3 ] && ok "preflight WARN exit 3" || bad "preflight WARN exit ($rc)"
# --max-step-time reaches the policy: the example's step (about 14 s on 64 H100s) breaches 1 s, not 1000 s.
out=$("$bin" preflight "$root/examples/llama3-70b-h100.yaml" --server "$addr" --max-step-time 1); rc=$?
{ [ $rc -eq 4 ] && grep -q "max_step_time_s" <<<"$out"; } && ok "preflight --max-step-time 1: FAIL exit 4, rule named" \
  || { bad "preflight --max-step-time 1 ($rc)"; echo "$out"; }
"$bin" preflight "$root/examples/llama3-70b-h100.yaml" --server "$addr" --max-step-time 1000 >/dev/null; rc=$?
[ $rc -eq 0 ] && ok "preflight --max-step-time 1000: PASS exit 0" || bad "preflight --max-step-time 1000 ($rc)"
# A layout that does not fit: FAIL, with a suggested layout on the same GPUs that fits.
printf 'model: llama3-70b\nhardware: h100-sxm\ncluster: {gpu_count: 64}\nparallelism: {tp: 1, pp: 1}\ntraining: {seq_length: 8192, global_batch_size: 128}\n' \
  > "$work/nofit.yaml"
out=$("$bin" preflight "$work/nofit.yaml" --server "$addr"); rc=$?
{ [ $rc -eq 4 ] && grep -q "SUGGESTION (does not fit)" <<<"$out" && grep -qE "^    (parallelism|training)\.[a-z_]+ +.* -> " <<<"$out"; } \
  && ok "preflight of a job that does not fit suggests a layout" || { bad "preflight suggestion ($rc)"; echo "$out"; }
"$bin" preflight "$work/nofit.yaml" --server "$addr" --json | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)["suggestion"]
assert s["reason"] == "does_not_fit" and s["suggested"]["prediction"]["memory"]["fits"], s
assert s["suggested"]["prediction"]["gpu_count"] == 64' && ok "the suggested layout fits on the same 64 GPUs" \
  || bad "suggested layout does not fit"
"$bin" preflight "$root/examples/llama3-70b-h100.yaml" --server 127.0.0.1:1 --deadline-ms 2000 >/dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && ok "preflight unreachable exit 1" || bad "preflight unreachable exit ($rc)"
"$bin" report --server "$addr" --prediction-id "$id" --step-time-s 15.0 >/dev/null 2>&1; rc=$?
[ $rc -ne 0 ] && ok "report without token refused" || bad "report without token accepted"
out=$("$bin" report --server "$addr" --prediction-id "$id" --step-time-s 15.0 --token-file "$work/token" --label team=e2e); rc=$?
[ $rc -eq 0 ] && ok "report stored" || { bad "report ($rc)"; echo "$out"; }
run=$(grep -o 'run-[0-9a-f]*' <<<"$out" | head -1)
out=$("$bin" runs --server "$addr" --label team=e2e)
grep -q "$run" <<<"$out" && ok "runs lists predicted vs measured" || { bad "runs"; echo "$out"; }

# 2b. The probe's reports: merged across ranks, reported, compared (file and run:<id>).
for r in 0 1; do
  step=$([ $r -eq 0 ] && echo 14.0 || echo 15.0)
  cat > "$work/rank$r.json" <<JSON
{"rank": $r, "rank_count": 1, "step_source": "nvtx:step", "warmup_steps": 2,
 "steps": [{"step": 2, "step_time_s": $step, "busy": {"gemm_s": 9.5, "attention_s": 1.2, "communication_s": 2.0,
            "elementwise_s": 1.0, "memory_copy_s": 0.1}, "exposed_communication_s": 1.5, "idle_s": 0.8},
           {"step": 3, "step_time_s": $step, "busy": {"gemm_s": 9.5, "attention_s": 1.2, "communication_s": 2.0,
            "elementwise_s": 1.0, "memory_copy_s": 0.1}, "exposed_communication_s": 1.5, "idle_s": 0.8}]}
JSON
done
"$bin" predict --json "$root/examples/llama3-70b-h100.yaml" > "$work/pred.json"
out=$("$bin" compare "$work/pred.json" "$work/rank0.json" "$work/rank1.json"); rc=$?
{ [ $rc -eq 0 ] && grep -q "largest difference" <<<"$out" && grep -q "15.0000 s" <<<"$out"; } \
  && ok "compare merges ranks (slowest sets the step) and names the largest difference" || { bad "compare ($rc)"; echo "$out"; }
out=$("$bin" report --server "$addr" --token-file "$work/token" --prediction-id "$id" --probe "$work/rank0.json" "$work/rank1.json"); rc=$?
prun=$(grep -o 'run-[0-9a-f]*' <<<"$out" | head -1)
{ [ $rc -eq 0 ] && grep -q "largest difference" <<<"$out"; } && ok "report --probe stores the categories" || { bad "report --probe ($rc)"; echo "$out"; }
out=$("$bin" compare "run:$prun" --server "$addr"); rc=$?
{ [ $rc -eq 0 ] && grep -q "communication" <<<"$out"; } && ok "compare run:<id> from the service" || { bad "compare run ($rc)"; echo "$out"; }

# 2c. A training log (stepcast report --log): its median step time after the warm-up record, and the
# framework's own TFLOP/s stored with the run. megatron_lm_gpt.log: 9000.0 (warm-up) | 5210.4, 5198.7,
# 5225.0, 5201.9 ms -> 5.20615 s; 150.2 | 259.4, 260.0, 258.7, 259.8 TFLOP/s/GPU -> 259.6.
# The log states "global batch size: 256": the job reported with it must be that run's (a job of
# another batch is refused, below).
logs="$root/tests/data/training_logs"
sed 's/global_batch_size: 8$/global_batch_size: 256/; s/gpu_count: 1}/gpu_count: 8}/' "$root/examples/gpt-1.3b-pytorch-h100.yaml" > "$work/gbs256.yaml"
out=$("$bin" report --server "$addr" --token-file "$work/token" --job "$root/examples/llama3-8b-torchtitan-a100.yaml" \
      --log "$logs/megatron_lm_gpt.log" 2>&1); rc=$?
{ [ $rc -eq 2 ] && grep -q "the log's global batch size is 256, the job's 64" <<<"$out"; } \
  && ok "report --log of another global batch is refused (exit 2)" || { bad "report --log other batch ($rc)"; echo "$out"; }
out=$("$bin" report --server "$addr" --token-file "$work/token" --job "$work/gbs256.yaml" \
      --log "$logs/megatron_lm_gpt.log" --json); rc=$?
{ [ $rc -eq 0 ] && grep -q '"measured_step_time_s": 5.2061' <<<"$out" && grep -q '"tflops_per_gpu": 259.6' <<<"$out" \
  && grep -q '"source": "training-log:megatron"' <<<"$out"; } \
  && ok "report --log stores the median step time and the framework's TFLOP/s" || { bad "report --log ($rc)"; echo "$out"; }
out=$("$bin" report --server "$addr" --token-file "$work/token" --job "$work/gbs256.yaml" \
      --log "$logs/megatron_lm_gpt.log"); rc=$?
{ [ $rc -eq 0 ] && grep -q "megatron log: 4 iterations after 1 warm-up record, 259.6 TFLOP/s per GPU" <<<"$out"; } \
  && ok "report --log prints what the log states" || { bad "report --log text ($rc)"; echo "$out"; }
out=$("$bin" report --server "$addr" --prediction-id "$id" --log "$logs/megatron_lm_gpt.log" --step-time-s 5 2>&1); rc=$?
{ [ $rc -eq 2 ] && grep -q -- "--log" <<<"$out" && grep -q -- "--step-time-s" <<<"$out"; } \
  && ok "report --log with --step-time-s refused (exit 2)" || { bad "report --log + --step-time-s ($rc)"; echo "$out"; }
printf ' iteration 1/ 9 | elapsed time per iteration (ms): 1.0 |\n iteration 2/ 9 | elapsed time per iteration (ms): -4 |\n' \
  > "$work/bad.log"
out=$("$bin" report --server "$addr" --prediction-id "$id" --log "$work/bad.log" 2>&1); rc=$?
{ [ $rc -eq 2 ] && grep -q "bad.log: line 2: elapsed time per iteration" <<<"$out"; } \
  && ok "report --log: a bad log is refused with file, line and field (exit 2)" || { bad "report bad log ($rc)"; echo "$out"; }
out=$("$bin" report --dry-run --log "$logs/torchtitan_llama3_8b.log" 2>&1); rc=$?
{ [ $rc -eq 2 ] && grep -q -- "--gpus" <<<"$out"; } \
  && ok "report --log torchtitan without --gpus refused (exit 2)" || { bad "torchtitan without --gpus ($rc)"; echo "$out"; }
out=$("$bin" report --dry-run --log "$logs/torchtitan_llama3_8b.log" --gpus 8); rc=$?
{ [ $rc -eq 0 ] && grep -q '"measured_tokens_per_s": 54360' <<<"$out" && grep -q '"mfu": 0.4034' <<<"$out"; } \
  && ok "report --log --dry-run: torchtitan tps x GPUs, its own MFU" || { bad "torchtitan dry run ($rc)"; echo "$out"; }

# 3. Python client and launcher wrapper (Debian's python3-grpcio).
STEPCAST_SERVER="$addr" STEPCAST_TOKEN=secret-token STEPCAST_ROOT="$root" STEPCAST_BIN="$bin" \
  PYTHONPATH="$pybuild:$root/plugin/python" timeout 120 /usr/bin/python3 "$root/tests/python_client_test.py" -v \
  >"$work/py.log" 2>&1 && ok "python client tests" || { bad "python client tests"; cat "$work/py.log"; }

# 4. Graceful SIGTERM: NOT_SERVING, drain, exit 0.
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then bad "SIGTERM did not stop the server in 10 s"; else
  wait "$pid"; rc=$?
  [ $rc -eq 0 ] && grep -q "stopped" "$work/serve.log" && ok "SIGTERM graceful exit 0" || bad "SIGTERM exit ($rc)"
fi
pid=

# 5. An acknowledged report survives kill -9 right after.
start
out=$("$bin" report --server "$addr" --job "$root/examples/llama3-70b-h100.yaml" --step-time-s 13.9 \
      --token-file "$work/token" --label durable=yes)
run=$(grep -o 'run-[0-9a-f]*' <<<"$out" | head -1)
kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
start
out=$("$bin" runs --server "$addr" --label durable=yes)
[ -n "$run" ] && grep -q "$run" <<<"$out" && ok "report survives kill -9" || { bad "report lost after kill -9"; echo "$out"; }
grep -q "rpc=ReportRun status=OK latency_us=" "$work/serve.log" && ok "one log line per RPC" || bad "RPC log"
exit $fail
