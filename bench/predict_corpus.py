#!/usr/bin/env python3
"""Writes what a stepcast binary predicts for a fixed corpus of jobs, one file per job, so that two
builds can be compared with `diff -r` (docs/PERFORMANCE.md "Identical predictions").

  bench/predict_corpus.py BINARY OUTDIR

The corpus: every example (`predict --json`, and the text report), the validation table
(`validate`, text and --json), the reliability inputs of tests/data (their errors), and a
generated matrix of jobs over every framework preset (and none), several models, GPUs, GEMM
dtypes and layouts, plus inline framework specs laid over a preset (`framework: {spec: {base: ..}}`),
attention kernels, and jobs that must fail (unknown presets, bad defaults in an inline spec).
Each output file holds the exit status, stdout and stderr of one command. The generated jobs are
written to /tmp/stepcast_corpus_jobs (one fixed path: error messages name the file).
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The validation set shipped with the repository (tests/data/validation, the same 158 rows as the
# shared reference folder's copy).
VALIDATION_CSV = os.path.join(ROOT, "tests", "data", "validation", "published_runs.csv")

FRAMEWORKS = ["", "megatron-core", "megatron-bridge", "megatron-lm-2021", "megatron-lm-2022", "nemo",
              "torchtitan", "torchtitan-compile", "llm-foundry", "deepspeed", "maxtext", "paxml"]
# (model preset, layouts): each layout a YAML fragment of parallelism + cluster.
MODELS = {
    "llama3-8b": ["cluster: {gpu_count: 8}\nparallelism: {tp: 1}",
                  "cluster: {gpu_count: 16}\nparallelism: {tp: 2, pp: 2}"],
    "llama3-70b": ["cluster: {gpu_count: 64}\nparallelism: {tp: 4, pp: 8, vpp: 5}",
                   "cluster: {gpu_count: 64}\nparallelism: {tp: 8, pp: 4}"],
    "mixtral-8x7b": ["cluster: {gpu_count: 64}\nparallelism: {tp: 2, pp: 4, ep: 8}"],
    "deepseek-v3": ["cluster: {gpu_count: 256}\nparallelism: {pp: 8, ep: 32}"],
    "gpt3-175b": ["cluster: {gpu_count: 1024}\nparallelism: {tp: 8, pp: 16}"],
    "gpt-1.7b": ["cluster: {gpu_count: 8}"],
}
HARDWARE = ["h100-sxm", "a100-80gb", "gb200", "mi300x"]
PRECISIONS = ["", "fp8", "fp32"]
TRAININGS = ["seq_length: 4096, global_batch_size: 512",
             "seq_length: 8192, global_batch_size: 128, recompute: selective, micro_batch_size: 2"]

# Inline framework specs and jobs that must fail.
SPECIAL = {
    "inline_over_nemo": """model: llama3-70b
hardware: h100-sxm
framework:
  spec:
    base: nemo
    defaults:
    - {field: training.sharding, value: zero2, source: 'test: a site default'}
    - {field: training.dropout, value: 'true', source: 'test'}
cluster: {gpu_count: 64}
parallelism: {tp: 4, pp: 4}
training: {seq_length: 4096, global_batch_size: 256}
""",
    "inline_named_over_torchtitan": """model: llama3-8b
hardware: a100-80gb
framework:
  spec:
    base: torchtitan
    name: my-titan
    recipes:
    - models: ['llama3 8b', 'llama3-8b']
      source: 'test recipe'
      values:
      - {field: training.recompute, value: full}
cluster: {gpu_count: 16}
training: {seq_length: 8192, global_batch_size: 64}
""",
    "inline_no_base": """model: llama3-8b
hardware: h100-sxm
framework:
  spec:
    attention: {kernel: my-flash, fused: true}
    defaults:
    - {field: training.overlap_dp_comm, value: 'true'}
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
""",
    "inline_bad_default_value": """model: llama3-8b
hardware: h100-sxm
framework:
  spec:
    base: megatron-core
    defaults:
    - {field: training.sharding, value: zero9}
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
""",
    "inline_bad_default_value_but_set": """model: llama3-8b
hardware: h100-sxm
framework:
  spec:
    base: megatron-core
    defaults:
    - {field: training.sharding, value: zero9}
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64, sharding: zero1}
""",
    "inline_bad_default_field": """model: llama3-8b
hardware: h100-sxm
framework:
  spec:
    base: megatron-core
    defaults:
    - {field: training.nonsense, value: '1'}
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
""",
    "inline_unknown_base": """model: llama3-8b
hardware: h100-sxm
framework: {spec: {base: megatron-9000}}
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
""",
    "inline_bad_rate": """model: llama3-8b
hardware: h100-sxm
framework: {spec: {base: nemo, launch: {kernel_launch_overhead_s: 1}}}
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
""",
    "unknown_framework": """model: llama3-8b
hardware: h100-sxm
framework: megatron-9000
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
""",
    "empty_framework_name": """model: llama3-8b
hardware: h100-sxm
framework: {preset: ''}
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
""",
    "unknown_model": """model: gpt-5
hardware: h100-sxm
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
""",
    "unknown_hardware": """model: llama3-8b
hardware: h900
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64}
""",
    "attention_alternative": """model: llama3-8b
hardware: h100-sxm
framework: torchtitan
cluster: {gpu_count: 8}
training: {seq_length: 8192, global_batch_size: 64, attention_kernel: sdpa-cudnn}
""",
    "attention_triton": """model: llama3-8b
hardware: a100-80gb
framework: llm-foundry
cluster: {gpu_count: 8}
training: {seq_length: 2048, global_batch_size: 256, attention_kernel: triton-flash}
""",
    "attention_unfused": """model: llama3-8b
hardware: h100-sxm
framework: megatron-core
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64, attention_kernel: unfused}
""",
    "attention_unknown": """model: llama3-8b
hardware: h100-sxm
framework: torchtitan
cluster: {gpu_count: 8}
training: {seq_length: 4096, global_batch_size: 64, attention_kernel: nope}
""",
    "hardware_overrides": """model: llama3-70b
hardware: {preset: h100-sxm, overrides: {hbm_capacity_bytes: 94e9, compute_rate_scale: 0.9, name_suffix: NVL}}
framework: megatron-bridge
cluster: {gpu_count: 64}
parallelism: {tp: 8, pp: 2}
training: {seq_length: 8192, global_batch_size: 128}
""",
    "explicit_everything": """model: llama3-8b
hardware: h100-sxm
framework: nemo
cluster: {gpu_count: 8}
parallelism: {tp: 2, sequence_parallel: true}
training:
  seq_length: 4096
  global_batch_size: 64
  micro_batch_size: 1
  precision: {gemm: bf16, params: bf16, grads: fp32, master_weights: fp32, optimizer_states: fp32, grad_reduce: fp32}
  optimizer: adamw
  recompute: none
  sharding: zero1
  overlap_dp_comm: true
  overlap_tp_comm: true
  dropout: true
  fp8_param_gather: false
  flash_attention: true
  cuda_graphs: false
""",
    "recompute_modules": """model: deepseek-v3
hardware: h100-sxm
framework: megatron-bridge
cluster: {gpu_count: 512}
parallelism: {pp: 16, ep: 64}
training: {seq_length: 4096, global_batch_size: 4096, recompute: selective, recompute_modules: [mla_up_proj, moe_act]}
""",
}


def run(cmd, out_path):
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    with open(out_path, "w") as f:
        f.write(f"rc {p.returncode}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    # Jobs at a fixed path: error messages name the file, so both runs must read the same path.
    jobs = os.path.join("/tmp", "stepcast_corpus_jobs")
    os.makedirs(jobs, exist_ok=True)
    results = os.path.join(out, "results")
    os.makedirs(results, exist_ok=True)

    run([binary, "validate", VALIDATION_CSV], os.path.join(results, "validate.txt"))
    run([binary, "validate", "--json", VALIDATION_CSV], os.path.join(results, "validate.json"))
    examples = sorted(f for f in os.listdir(os.path.join(ROOT, "examples"))
                      if f.endswith((".yaml", ".textproto")))
    for f in examples:
        path = os.path.join("examples", f)
        run([binary, "predict", "--json", path], os.path.join(results, f"example_{f}.json"))
        run([binary, "predict", path], os.path.join(results, f"example_{f}.txt"))
    run([binary, "predict", "--json", "--profile", "examples/profiles/h100-sxm-device-2026-11-25.json",
         "examples/llama3-70b-h100.yaml"], os.path.join(results, "example_profile.json"))
    rel = os.path.join(ROOT, "tests", "data", "reliability_inputs")
    for f in sorted(os.listdir(rel)):
        if f.endswith((".yaml", ".textproto", ".json")) and "dev_zero" not in f:
            run([binary, "predict", "--json", os.path.join(rel, f)], os.path.join(results, f"reliability_{f}.txt"))

    specs = dict(SPECIAL)
    for fw in FRAMEWORKS:
        for model, layouts in MODELS.items():
            for li, layout in enumerate(layouts):
                for hw in HARDWARE:
                    for prec in PRECISIONS:
                        for ti, tr in enumerate(TRAININGS):
                            if ti == 1 and (prec != "" or hw != "h100-sxm"):
                                continue
                            training = tr + (f", precision: {{gemm: {prec}}}" if prec else "")
                            name = f"{fw or 'none'}_{model}_{li}_{hw}_{prec or 'default'}_{ti}"
                            specs[name] = (f"model: {model}\nhardware: {hw}\n" +
                                           (f"framework: {fw}\n" if fw else "") +
                                           f"{layout}\ntraining: {{{training}}}\n")
    for name, text in sorted(specs.items()):
        path = os.path.join(jobs, name + ".yaml")
        with open(path, "w") as f:
            f.write(text)
        run([binary, "predict", "--json", path], os.path.join(results, name + ".json"))
    print(f"{len(specs) + 2 * len(examples) + 3} outputs in {results}")


if __name__ == "__main__":
    main()
