// File: proto/megatron_args.h
//
// Megatron-LM launch lines: `python pretrain_gpt.py --num-layers 80 ...`, also behind
// torchrun/srun arguments. The model, batch, parallelism and precision flags are mapped; every
// other argument is returned in ImportedJob::ignored (never silently dropped).
#ifndef STEPCAST_PROTO_MEGATRON_ARGS_H_
#define STEPCAST_PROTO_MEGATRON_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/launch_common.h"

namespace stepcast {

// Megatron-LM arguments (arguments.py names and defaults). `argv` is the whole command; the
// arguments after the first "*.py" (or "-m module") token are read, everything before it
// (python, torchrun and its flags) is skipped. Errors name the flag ("--num-layers: required").
//   model    --num-layers --hidden-size --num-attention-heads --group-query-attention
//            --num-query-groups --kv-channels --ffn-hidden-size (default 4h, SwiGLU
//            int(8h/3/64)*64) --swiglu --normalization --disable-bias-linear
//            --untie-embeddings-and-output-weights --position-embedding-type
//            --max-position-embeddings --vocab-size | --tokenizer-type/--tokenizer-model
//            (padded to --make-vocab-size-divisible-by x TP as Megatron does) --num-experts
//            --moe-router-topk --moe-ffn-hidden-size --moe-shared-expert-intermediate-size
//            --moe-layer-freq
//   training --seq-length --micro-batch-size --global-batch-size --bf16 --fp16 --fp8-format
//            --recompute-granularity --recompute-method --recompute-activations
//            --use-distributed-optimizer --use-torch-fsdp2 --overlap-grad-reduce
//            --tp-comm-overlap --attention-backend --use-flash-attn --hidden-dropout
//            --attention-dropout --train-iters --train-samples
//   layout   --tensor-model-parallel-size --pipeline-model-parallel-size
//            --num-layers-per-virtual-pipeline-stage --context-parallel-size
//            --expert-model-parallel-size --sequence-parallel
//   added (issue 10): --multi-latent-attention --q-lora-rank --kv-lora-rank --qk-head-dim
//            --qk-pos-emb-head-dim --v-head-dim (MLA), --quick-geglu, --squared-relu,
//            --num-virtual-stages-per-pipeline-rank, --expert-tensor-parallel-size,
//            --grad-reduce-in-bf16, --fp8-param-gather, --recompute-modules (nargs '*'),
//            --recompute-method/--recompute-num-layers (block), --padded-vocab-size,
//            --data-parallel-sharding-strategy (Megatron-FSDP), --cuda-graph-impl,
//            --enable-cuda-graph, --external-cuda-graph, --checkpoint-activations;
//            --moe-layer-freq accepts Megatron's Python-list patterns ("([0]*3+[1]*58)").
// Vocabulary: --padded-vocab-size, else --vocab-size, else the tokenizer's (GPT2BPETokenizer,
// Llama2Tokenizer, a local --tokenizer-model directory's config.json, or a known model name in
// --tokenizer-model), else InvalidArgument naming --vocab-size.
// Integer flags are bounded (sizes and degrees <= 2^31-1, run lengths <= 2^53): out of range is
// an error naming the flag, never an overflow.
// Every other argument (with all its values) is in `ignored`; tests/data/megatron_args.txt lists
// every option of arguments.py and a test checks each is modelled or listed.
absl::StatusOr<ImportedJob> JobFromMegatronArgs(const std::vector<std::string>& argv);

// True when the Megatron-LM option (with or without the leading "--") is read into the job.
bool IsModelledMegatronFlag(absl::string_view name);

}  // namespace stepcast

#endif  // STEPCAST_PROTO_MEGATRON_ARGS_H_
