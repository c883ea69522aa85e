#!/usr/bin/env python3
"""PyTorch SDPA forward and backward rates by backend, sequence length and mask, on this GPU.

The attention rates of the framework presets (presets/frameworks/*.yaml `attention.rates`) are
per kernel, head_dim, sequence length and mask; this script measures them for the SDPA backends a
PyTorch training loop can run: the one PyTorch picks by default, FlashAttention-2 (FLASH), cuDNN
(CUDNN) and memory-efficient (EFFICIENT). FlashAttention's benchmark conventions
(Dao 2023, arXiv:2307.08691, Sec. 4.1; flash-attention benchmarks/benchmark_flash_attention.py):
bf16, 16k tokens per batch (batch = 16384 / seq), hidden 2048 (16 heads of 128), forward FLOPs
4 * batch * heads * seq^2 * head_dim, halved for a causal mask, backward 2.5x the forward.
Each figure: median of 30 CUDA-event-timed runs after 5 warm-up runs, fresh random inputs.

Usage: attention_bench.py [--json OUT.json] [--seqs 512,1024,...] [--head-dim 128]
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_s(fn, iters=30, warmup=5):
    for _ in range(warmup):
        fn()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    stop = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        start[i].record()
        fn()
        stop[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) / 1e3 for a, b in zip(start, stop))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--seqs", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--head-dim", type=int, default=128)
    a = ap.parse_args()
    d = a.head_dim
    heads = 2048 // d
    backends = [("default", None), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    rows = []
    print(f"{'backend':10s} {'seq':>6s} {'causal':>6s} {'fwd TFLOP/s':>12s} {'bwd TFLOP/s':>12s}")
    for seq in (int(s) for s in a.seqs.split(",")):
        batch = max(1, 16384 // seq)
        for causal in (True, False):
            fwd_flops = 4.0 * batch * heads * seq * seq * d / (2 if causal else 1)
            for name, backend in backends:
                q, k, v = (torch.randn(batch, heads, seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                g = torch.randn(batch, heads, seq, d, device="cuda", dtype=torch.bfloat16)

                def fwd():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                try:
                    ctx = sdpa_kernel([backend]) if backend is not None else None
                    if ctx:
                        ctx.__enter__()
                    try:
                        t_fwd = median_s(lambda: fwd())
                        out = fwd()
                        t_bwd = median_s(lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True))
                    finally:
                        if ctx:
                            ctx.__exit__(None, None, None)
                except RuntimeError as e:
                    print(f"{name:10s} {seq:6d} {str(causal):>6s}  not available: {str(e).splitlines()[0][:80]}")
                    continue
                row = {"backend": name, "seq_length": seq, "causal": causal, "head_dim": d, "heads": heads,
                       "batch": batch, "forward_flops_per_s": fwd_flops / t_fwd,
                       "backward_flops_per_s": 2.5 * fwd_flops / t_bwd}
                rows.append(row)
                print(f"{name:10s} {seq:6d} {str(causal):>6s} {row['forward_flops_per_s'] / 1e12:12.1f} "
                      f"{row['backward_flops_per_s'] / 1e12:12.1f}")
                del q, k, v, g
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version()}
    print(json.dumps(meta))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
