#!/usr/bin/env bash
# The importers through the command line (issue 10): usage errors exit 2, impossible measurements
# are refused before anything is sent, Megatron-LM / torchtitan commands are imported with every
# unmodelled argument listed with its value.
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
  if ! grep -qF -- "$2" <<<"$LAST"; then echo "FAIL $1: output lacks '$2'"; echo "$LAST" | tail -5; fail=1; else echo "ok   $1"; fi
}

# CLI11 parse errors (unknown option, missing value, bad number, no subcommand) exit 2, not 101-115.
check unknown-option 2 "$bin" predict --no-such-flag "$root/examples/llama3-70b-h100.yaml"
check missing-value 2 "$bin" predict "$root/examples/llama3-70b-h100.yaml" --mfu
check not-a-number 2 "$bin" predict "$root/examples/llama3-70b-h100.yaml" --mfu lots
check no-subcommand 2 "$bin"
check help-is-success 0 "$bin" --help

# report: impossible measurements are refused (no server is contacted: 127.0.0.1:9 would fail).
check report-huge-step 2 "$bin" report --server 127.0.0.1:9 --prediction-id p --step-time-s 1e300
contains report-huge-step-says "--step-time-s: 1e+300 s is more than a day"
check report-negative 2 "$bin" report --server 127.0.0.1:9 --prediction-id p --step-time-s -3
check report-negative-tps 2 "$bin" report --server 127.0.0.1:9 --prediction-id p --tokens-per-s -1

# Megatron-LM: MLA DeepSeek-V3-like line imports; unmodelled flags are listed with their values.
check import-megatron 0 "$bin" import --gpus 64 --hardware h100-sxm -- torchrun --nproc-per-node 8 pretrain_gpt.py \
  --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --multi-latent-attention --kv-lora-rank 256 \
  --q-lora-rank 512 --num-experts 16 --moe-ffn-hidden-size 512 --moe-layer-freq "([0]*2+[1]*6)" \
  --seq-length 4096 --max-position-embeddings 4096 --position-embedding-type rope --global-batch-size 64 --bf16 \
  --vocab-size 32000 --expert-model-parallel-size 8 \
  --expert-tensor-parallel-size 1 --num-virtual-stages-per-pipeline-rank 2 --pipeline-model-parallel-size 2 \
  --data-path 0.5 /a 0.5 /b --mtp-num-layers 1
contains import-mla '"kv_lora_rank": "256"'
contains import-first-dense '"first_dense_layers": "2"'
contains import-vpp '"vpp": "2"'
contains import-etp '"etp": "1"'
contains import-lists-data-path "ignored (not modelled): --data-path 0.5 /a 0.5 /b"
contains import-reads-mtp '"mtp_layers": "1"'
check import-no-vocab 2 "$bin" import --gpus 8 --hardware h100-sxm -- pretrain_gpt.py --num-layers 2 \
  --hidden-size 64 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 --global-batch-size 8 \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model /nowhere/tok
contains import-no-vocab-hint "add --vocab-size N"

# torchtitan: a corpus TOML with overrides; unknown override keys are listed.
toml="$root/tests/data/real_inputs/torchtitan/torchtitan_models_qwen3_train_configs_qwen3_32b.toml"
check import-torchtitan 0 "$bin" import --gpus 64 --hardware h100-sxm -- torchrun --nproc_per_node 8 \
  -m torchtitan.train --job.config_file "$toml" --parallelism.tensor_parallel_degree 8 --metrics.log_freq 1
contains import-torchtitan-tp '"tp": "8"'
contains import-torchtitan-lists "ignored (not modelled): metrics.log_freq"
check predict-torchtitan-current 0 "$bin" predict --gpus 8 --hardware h100-sxm -- python -m torchtitan.train \
  --module llama3 --config llama3_8b --training.local_batch_size 1 --training.seq_len 8192
contains predict-torchtitan-current-lists "ignored (not modelled): --config llama3_8b"
# predict --json: the unmodelled arguments are in the JSON too (warnings).
check predict-json-ignored 0 "$bin" predict --json --gpus 8 --hardware h100-sxm -- pretrain_gpt.py --num-layers 2 \
  --hidden-size 256 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --global-batch-size 8 \
  --vocab-size 1000 --bf16 --lr 3e-4
contains predict-json-lists-lr 'ignored (not modelled): --lr 3e-4'
# Issue 23: `import` is listed in --help; torchtitan commands run as the torchtitan preset and
# --framework overrides it; the GPU count comes from torchrun when --gpus is absent; launch lines
# Megatron refuses are errors naming the flag.
check help-lists-import 0 "$bin" --help
contains help-lists-import-says "import"
check predict-torchtitan-framework 0 "$bin" predict --gpus 64 --hardware h100-sxm -- torchrun --nproc_per_node 8 \
  -m torchtitan.train --module llama3 --config llama3_70b
contains predict-torchtitan-framework-says "framework  torchtitan"
contains predict-torchtitan-tp8 "TP=8"
MEG="--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 \
 --global-batch-size 64 --vocab-size 32000 --bf16"
check predict-framework-flag 0 "$bin" predict --gpus 8 --hardware h100-sxm --framework megatron-bridge -- \
  pretrain_gpt.py $MEG
contains predict-framework-flag-says "framework  Megatron-Bridge"
check predict-gpus-from-torchrun 0 "$bin" predict --hardware h100-sxm -- torchrun --nproc_per_node 8 --nnodes 2 \
  pretrain_gpt.py $MEG
contains predict-gpus-from-torchrun-says "16 x"
# A GPU count or node size that is not a positive number is refused naming the flag (they fell back
# to the launcher's count in silence).
for bad in 0 -8; do
  check "predict-gpus-$bad" 2 "$bin" predict --gpus "$bad" --hardware h100-sxm -- torchrun --nproc_per_node 8 \
    pretrain_gpt.py $MEG
  contains "predict-gpus-$bad-says" "--gpus"
done
check predict-gpus-per-node-0 2 "$bin" predict --gpus 8 --gpus-per-node 0 --hardware h100-sxm -- pretrain_gpt.py $MEG
contains predict-gpus-per-node-0-says "--gpus-per-node"
check predict-uneven-pp 2 "$bin" predict --gpus 64 --hardware h100-sxm -- pretrain_gpt.py $MEG \
  --pipeline-model-parallel-size 3
contains predict-uneven-pp-says "--num-layers: 8 is not divisible by --pipeline-model-parallel-size 3"
check predict-tp-overlap-tp1 2 "$bin" predict --gpus 8 --hardware h100-sxm -- pretrain_gpt.py $MEG --tp-comm-overlap
contains predict-tp-overlap-tp1-says "--tp-comm-overlap: needs --tensor-model-parallel-size > 1"
# Hybrid Mamba-2 lines are their layer pattern (eleventh session), an MTP pattern after '/' its
# module (twelfth); MTP depths that differ are refused.
check predict-hybrid 0 "$bin" predict --gpus 8 --hardware h100-sxm -- torchrun --nproc_per_node 8 pretrain_hybrid.py \
  --hybrid-layer-pattern "M-M-M*-" --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
  --max-position-embeddings 4096 --vocab-size 131072 --global-batch-size 64 --bf16
contains predict-hybrid-says "no published run of a hybrid Mamba-2 model was validated"
check predict-hybrid-mtp 0 "$bin" import --gpus 8 --hardware h100-sxm -- torchrun --nproc_per_node 8 pretrain_hybrid.py \
  --hybrid-layer-pattern "M-M-M*-/*-/*-" --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
  --max-position-embeddings 4096 --vocab-size 131072 --global-batch-size 64 --bf16 --position-embedding-type none
contains predict-hybrid-mtp-says '"hybrid_mtp_pattern": "*-"'
check predict-hybrid-mtp-uneven 2 "$bin" predict --gpus 8 --hardware h100-sxm -- torchrun --nproc_per_node 8 pretrain_hybrid.py \
  --hybrid-layer-pattern "M-M-M*-/*-/*E" --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
  --max-position-embeddings 4096 --vocab-size 131072 --global-batch-size 64 --bf16
contains predict-hybrid-mtp-uneven-says "MTP pattern 2 '*E' differs from the first '*-'"

# The search's "To run #1" names the flags Megatron-LM needs to start the best layout (issue 23
# item 4): DeepSeek-V3's 61 layers at PP 9 only with the embedding and the loss counted as
# pipeline layers (61 + 2 = 63 = 9 x 7; megatron/core/transformer/transformer_block.py).
check search-names-uneven-split-flags 0 "$bin" search "$root/examples/deepseek-v3-gb200.textproto" --gpus 256..4096
contains search-best-pp9 "parallelism.pp                   4 -> 9"
contains search-needs-flags "and, to start it: --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"

# The torchtitan config registry data is what the extractor reads from torchtitan's own files
# (verbatim copies at commit b5bcd76c in tests/data/real_inputs/torchtitan_registry).
if command -v python3 >/dev/null; then
  tmp=$(mktemp -d)
  python3 "$root/scripts/extract_torchtitan_configs.py" "$root/tests/data/real_inputs/torchtitan_registry" \
    b5bcd76c66d0acb1a08b176d9639425bc55e0b2a "$tmp" llama3 qwen3 deepseek_v3 gpt_oss
  for m in llama3 qwen3 deepseek_v3 gpt_oss; do
    if diff -q "$tmp/$m.toml" "$root/presets/torchtitan_configs/$m.toml" >/dev/null; then echo "ok   registry-data-$m"
    else echo "FAIL registry-data-$m: presets/torchtitan_configs/$m.toml differs from its extraction"; fail=1; fi
  done
  rm -rf "$tmp"
fi
exit $fail
