#!/usr/bin/env python3
"""Per-module figures of the DeepSeek-V3 H800 training trace, computed independently of stepcast.

  python3 tests/data/real_data/deepseek_v3_modules.py \
      ../shared/real_data/traces/deepseek/deepseek_v3_h800_ep64_dualpipe_train.json.gz \
      > tests/data/real_data/deepseek_v3_modules.json

Python standard library only. Kernel categories come from the reading of each name in
tests/data/real_data/traces/kernel_names_new_traces.tsv and kernel_names_classified.tsv (with its
corrections): a lookup, not stepcast's rules. A GPU
record belongs to the innermost user annotation open when its launch (the cuda_runtime /
cuda_driver event with its correlation id) happened, on any thread: the backward's launches come
from the autograd thread while the main thread's annotation is open. Per layer = sum over the 4
ranges of a module / 4. The trace itself is not copied into the project (the source repository
states no licence); this file holds figures derived from it.
"""
import collections, gzip, json, os, statistics, sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ["attn(F)", "attn(B)", "attn(W)", "mlp(F)", "mlp(B)", "mlp(W)", "dispatch(F)", "dispatch(B)",
           "combine(F)", "combine(B)"]


def categories():
    cat = {}
    # Names the older table already holds (its reference column, with its corrections), then the newer traces' table.
    with open(os.path.join(HERE, "traces", "kernel_names_classified.tsv")) as f:
        next(f)
        for line in f:
            c = line.rstrip("\n").split("\t")
            cat[c[6]] = {"conv": "conv"}.get(c[2], c[2])
    with open(os.path.join(HERE, "traces", "kernel_names_corrections.tsv")) as f:
        for line in f:
            if line.startswith("#") or line.startswith("corrected_category"):
                continue
            c = line.rstrip("\n").split("\t")
            cat[c[2]] = c[0]
    with open(os.path.join(HERE, "traces", "kernel_names_new_traces.tsv")) as f:
        for line in f:
            if line.startswith("#") or line.startswith("reference_category"):
                continue
            c = line.rstrip("\n").split("\t")
            cat[c[4]] = c[0]
    return cat


def union(iv):
    iv = sorted(iv)
    out = []
    for s, e in iv:
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(u):
    return sum(e - s for s, e in u)


def intersect(a, b):
    i = j = 0
    s = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            s += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return s


def main():
    path = sys.argv[1]
    d = json.load(gzip.open(path))
    ev = d["traceEvents"]
    cat_of = categories()
    launch = {e["args"]["correlation"]: e for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ann = sorted([e for e in ev if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")],
                 key=lambda e: (e["ts"], -e["dur"]))
    step = [e for e in ev if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]

    def innermost(t):
        best = None
        for a in ann:
            if a["ts"] <= t < a["ts"] + a["dur"]:
                if best is None or a["ts"] > best["ts"] or (a["ts"] == best["ts"] and a["dur"] < best["dur"]):
                    best = a
        return best

    recs = []
    for g in gpu:
        c = g["args"]["correlation"]
        a = innermost(launch[c]["ts"])
        category = cat_of[g["name"]] if g["cat"] == "kernel" else "memory"
        recs.append({"name": g["name"], "s": g["ts"], "e": g["ts"] + g["dur"], "cat": category,
                     "stream": g["args"]["stream"], "module": a["name"] if a else "(none)",
                     "range": id(a), "grid": g["args"].get("grid"), "corr": c})
    comm_all = union([(r["s"], r["e"]) for r in recs if r["cat"] == "communication"])
    compute_all = union([(r["s"], r["e"]) for r in recs if r["cat"] not in ("communication", "memory")])
    instances = collections.Counter(a["name"] for a in ann)
    modules = {}
    for m in MODULES:
        rs = [r for r in recs if r["module"] == m]
        n = instances[m]
        per = collections.Counter()
        streams = collections.Counter()
        for r in rs:
            per[r["cat"]] += r["e"] - r["s"]
            streams[str(r["stream"])] += r["e"] - r["s"]
        comp = union([(r["s"], r["e"]) for r in rs if r["cat"] != "communication"])
        comm = union([(r["s"], r["e"]) for r in rs if r["cat"] == "communication"])
        total = sum(per.values())
        modules[m] = {
            "instances": n,
            "per_layer_us": {
                "gemm": per["gemm"] / n, "attention": per["attention"] / n, "communication": per["communication"] / n,
                "elementwise": per["elementwise"] / n, "memory": per["memory"] / n,
                "other": (per["elementwise"] + per["memory"]) / n, "total": total / n},
            "busy_per_layer_us": length(union([(r["s"], r["e"]) for r in rs])) / n,
            "streams_per_layer_us": {k: v / n for k, v in sorted(streams.items())},
            "compute_overlapped_by_communication_per_layer_us": intersect(comp, comm_all) / n,
            "compute_overlapped_share": (intersect(comp, comm_all) / length(comp)) if comp else None,
            "communication_overlapped_by_compute_per_layer_us": intersect(comm, compute_all) / n,
            "communication_overlapped_share": (intersect(comm, compute_all) / length(comm)) if comm else None,
        }
    # Host side (issue 21 item 1, the MoE host floor): how long the CPU took to issue each module's
    # GPU work. A module's host time is the CPU duration of its annotation ranges (the main thread
    # opens it; the backward's launches come from the autograd thread while it is open); its
    # launches are the GPU records attributed to it above. The compute modules (attn, mlp) only
    # issue work: no launch API call in them blocks (each takes a few microseconds) and the trace
    # has no cudaDeviceSynchronize / cudaStreamSynchronize inside them. dispatch and combine are left
    # out: DeepEP's host waits for the GPU's token counts there ("the CPU will wait for GPU's
    # signal", deep_ep buffer.py), so their CPU time is not issue time.
    launch_api = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and e["name"] in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel"):
            launch_api[e["args"]["correlation"]] = e["dur"]
    cpu_us = collections.Counter()
    for a in ann:
        cpu_us[a["name"]] += a["dur"]
    host = {}
    for m in MODULES:
        rs = [r for r in recs if r["module"] == m]
        api = [launch_api[r["corr"]] for r in rs if r["corr"] in launch_api]
        host[m] = {"cpu_us_per_layer": cpu_us[m] / instances[m], "gpu_records_per_layer": len(rs) / instances[m],
                   "cpu_us_per_record": cpu_us[m] / max(1, len(rs)),
                   "launch_api_us_mean": statistics.mean(api) if api else None}
    compute = ["attn(F)", "attn(B)", "attn(W)", "mlp(F)", "mlp(B)", "mlp(W)"]
    api_compute = [launch_api[r["corr"]] for r in recs if r["module"] in compute and r["corr"] in launch_api]
    host_summary = {
        "modules": compute,
        "cpu_us": sum(cpu_us[m] for m in compute),
        "gpu_records": sum(1 for r in recs if r["module"] in compute),
        "launch_api_calls": len(api_compute),
        "launch_api_us_mean": statistics.mean(api_compute),
        "launch_api_us_median": statistics.median(api_compute),
    }
    host_summary["cpu_us_per_record"] = host_summary["cpu_us"] / host_summary["gpu_records"]
    host_summary["cpu_us_per_record_range_by_module"] = [min(host[m]["cpu_us_per_record"] for m in compute),
                                                         max(host[m]["cpu_us_per_record"] for m in compute)]
    host_summary["note"] = ("Measured with the profiler recording CPU ops and runtime calls (Kineto), which adds to the "
                            "host time; no correction applied. cpu_us_per_record: the CPU time an eager PyTorch "
                            "training layer takes per GPU record it issues (Python, op dispatch, autograd, the launch "
                            "call); launch_api_us_*: the cudaLaunchKernel / cudaLaunchKernelExC / cuLaunchKernel call "
                            "alone, what a kernel launched from a C++ loop inside one op costs the host.")
    cats = collections.Counter()
    for r in recs:
        cats[r["cat"]] += r["e"] - r["s"]
    first = min(r["s"] for r in recs)
    last = max(r["e"] for r in recs)

    # The forward GEMMs of one layer, in launch order, with the median over the 4 layers.
    def gemms(module):
        per_range = collections.defaultdict(list)
        for r in recs:
            if r["module"] == module and r["cat"] == "gemm":
                per_range[r["range"]].append(r)
        lists = [sorted(v, key=lambda r: r["s"]) for v in per_range.values()]
        assert len({len(v) for v in lists}) == 1, module
        out = []
        for i in range(len(lists[0])):
            durs = [v[i]["e"] - v[i]["s"] for v in lists]
            out.append((lists[0][i]["name"], lists[0][i]["grid"], statistics.median(durs), durs))
        return out

    T, H = 4096, 7168
    shapes = {
        "attn(F)": [("q down-projection (W_DQ)", T, 1536, H, "fp8"), ("kv down-projection + RoPE key (W_DKV, W_KR)", T, 576, H, "fp8"),
                    ("q up-projection (W_UQ, W_QR: 128 heads x 192)", T, 128 * 192, 1536, "fp8"),
                    ("kv up-projection (W_UK, W_UV: 128 heads x (128 + 128))", T, 128 * 256, 512, "fp8"),
                    ("output projection (W_O)", T, H, 128 * 128, "fp8"), ("router gate (256 experts)", T, 256, H, "bf16")],
        "mlp(F)": [("shared expert gate+up", T, 2 * 2048, H, "fp8"), ("routed experts gate+up (grouped, 4 local experts)", None, 2 * 2048, H, "fp8"),
                   ("routed experts down (grouped)", None, H, 2048, "fp8"), ("shared expert down", T, H, 2048, "fp8")],
    }
    routed_rows = []
    for r in recs:
        if r["module"] == "mlp(F)" and "swiglu_forward_with_weight_and_per_token_cast_to_fp8_with_channels_impl<__nv_bfloat16, true" in r["name"]:
            routed_rows.append(r["grid"][0])
    shape_rows = []
    for module, ops in shapes.items():
        ks = gemms(module)
        assert len(ks) == len(ops), (module, len(ks))
        for (name, grid, med, durs), (op, m, n, k, dtype) in zip(ks, ops):
            m_used = m if m is not None else statistics.mean(routed_rows)
            flop = 2 * m_used * n * k
            shape_rows.append({"module": module, "op": op, "M": m if m is not None else "routed rows (see routed_rows_per_layer)",
                               "N": n, "K": k, "dtype": dtype, "kernel": name[:120], "grid": grid,
                               "median_us": med, "per_layer_us": durs,
                               "implied_tflops_per_s": round(flop / (med * 1e-6) / 1e12, 1)})
    out = {
        "_source": "deepseek-ai/profile-data @ 4496024, train.json (read from ../shared/real_data/traces/deepseek/"
                   "deepseek_v3_h800_ep64_dualpipe_train.json.gz; not copied here: the repository states no licence). "
                   "Rank 0 of 64, NVIDIA H800 (132 SMs), EP 64, TP 1, 4K sequence, FP8 GEMMs, one DualPipe forward+"
                   "backward chunk pair of 4 MoE layers each, balanced routing simulated, PP communication not profiled.",
        "_method": __doc__.strip(),
        "_computed_by": "tests/data/real_data/deepseek_v3_modules.py (this file's figures; stepcast's `trace --annotations` "
                        "is checked against them in tests/trace_modules_test.cc)",
        "step": {
            "profiler_step_cpu_ms": step[0]["dur"] / 1000,
            "gpu_first_record_to_last_end_ms": (last - first) / 1000,
            "gpu_records": len(recs), "streams": sorted({r["stream"] for r in recs}),
            "layers_per_chunk": 4,
            "category_totals_ms": {k: v / 1000 for k, v in sorted(cats.items())},
        },
        "tokens_per_chunk": {
            "value": 4096, "micro_batch_size": 1, "sequence_length": 4096,
            "derivation": [
                "FlashAttention-3 forward grid (32, 128, 1) with Flash_fwd_kernel_traits<192, 128, 128, ...>: 32 query "
                "blocks x kBlockM 128 = 4,096 query tokens, 128 heads, batch 1 (FA3's grid is (m blocks, heads, batch))",
                "per_token_cast_to_fp8_with_channels on the layer input: grid (4096, 1, 1) of 128-thread blocks, one "
                "block per token row of the 4,096 x 7,168 activation",
                "the trace's own name: traces/prof_ep64_tp1_varsm_hidden7168_seqlen4096.json (traceName); the "
                "repository's README: EP64, TP1, 4K sequence",
            ],
        },
        "model": {
            "source": "DeepSeek-V3 technical report, arXiv:2412.19437, section 4.2 (hyper-parameters); confirmed in the "
                      "trace by the layer-norm kernels' widths (Kernel_traits<..., 7168u / 1536u / 512u>) and FA3's "
                      "head dimension 192 (128 + 64 RoPE) with value dimension 128 (FlashAttnBwd tile <64, 128, 128>)",
            "hidden_size": 7168, "attention_heads": 128, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
            "v_head_dim": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "routed_experts": 256,
            "experts_per_token": 8, "shared_experts": 1, "moe_intermediate_size": 2048,
            "local_routed_experts": 256 // 64,
        },
        "routed_rows_per_layer": {
            "values": routed_rows,
            "mean": statistics.mean(routed_rows),
            "balanced_expectation": 4096 * 8,
            "derivation": "grid x of swiglu_forward_with_weight_and_per_token_cast_to_fp8 (one 128-thread block per row, "
                          "as on the 4,096-token layer input) in mlp(F): the token-expert rows this rank's 4 routed experts "
                          "receive = the M of the grouped GEMMs. Perfectly balanced routing gives 4,096 tokens x 8 experts "
                          "x 64 ranks / 64 ranks = 32,768; the trace's layers vary 30,976-36,864.",
        },
        "gemm_shapes_forward": shape_rows,
        "gemm_shapes_note": "Forward GEMMs of one layer in launch order (median over the 4 layers), assigned to the "
                            "DeepSeek-V3 MLA/MoE projections by their order in the module (MLA: q and kv down-projections, "
                            "their up-projections, attention, output projection, then the router gate; MoE: shared expert "
                            "gate+up, routed gate+up, routed down, shared down) and checked by the implied rate: every "
                            "one between about 330 and 1,080 TFLOP/s, under the H800's 1,979 TFLOP/s dense FP8 peak (the "
                            "bf16 router gate lowest). The backward modules run the transposed shapes (dgrad in (B), "
                            "wgrad in (W)); their kernels are not assigned one by one here. The DeepGEMM-style kernels "
                            "are persistent (grid 112 = 132 SMs - DeepEP's 20, or 2 x 56), so their grid gives no shape.",
        "modules": modules,
        "host": {"per_module": host, "compute_modules": host_summary},
    }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
