#!/usr/bin/env python3
"""A GPT-style PyTorch training loop for the run probe (random tokens, bf16, NVTX "step" ranges).

    CUDA_INJECTION64_PATH=$PWD/build/lib/libstepcast_probe.so STEPCAST_PROBE_OUT=probe.%r.json \
        python examples/train_gpt.py --steps 40 --layers 24 --hidden 2048 --heads 16 --seq 2048 --batch 8

Prints the loop's own median step time (CUDA events around each step, warm-up left out) so it
can be set beside the probe's; run it with and without the probe for the overhead. The model is
plain PyTorch (pre-norm blocks, GELU MLP 4h, fused SDPA attention, tied embeddings), the shape
of `stepcast predict` GPT specs with the same numbers.

With --trace DIR it records a torch.profiler (Kineto) trace of steps after the warm-up instead,
for `stepcast trace DIR/*.pt.trace.json.gz` (ProfilerStep#N marks the steps). The probe and
torch.profiler are exclusive (both own CUPTI's activity records): use one or the other.
"""
import argparse
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, layers, h, heads, seq):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, h), nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(h)

    def forward(self, idx):
        x = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.emb.weight.t()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--trace", default="", help="write a torch.profiler trace of --trace-steps steps here")
    ap.add_argument("--trace-steps", type=int, default=6)
    a = ap.parse_args()
    prof = None
    if a.trace:
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                       schedule=schedule(wait=max(0, a.warmup - 1), warmup=1, active=a.trace_steps, repeat=1),
                       on_trace_ready=tensorboard_trace_handler(a.trace, use_gzip=True))
        prof.start()
    torch.manual_seed(0)
    model = GPT(a.vocab, a.layers, a.hidden, a.heads, a.seq).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    times = []
    for step in range(a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.nvtx.range_push("step")
        start.record()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        end.record()
        end.synchronize()
        torch.cuda.nvtx.range_pop()
        if step >= a.warmup:
            times.append(start.elapsed_time(end) / 1e3)
        if prof is not None:
            prof.step()
    if prof is not None:
        prof.stop()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params {n_params / 1e9:.3f}B; loop median step {statistics.median(times):.4f} s over {len(times)} steps; "
          f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB allocated, "
          f"{torch.cuda.max_memory_reserved() / 2**30:.2f} GiB reserved")


if __name__ == "__main__":
    main()
