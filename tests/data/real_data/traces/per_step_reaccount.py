#!/usr/bin/env python3
"""Independent per-step accounting of the HTA traces with the kernel categories of a lookup table.

Not stepcast code: the categories come from kernel_names_classified.tsv's reference column (a
careful reading of each name), with the rows of kernel_names_corrections.tsv applied (issue 24:
fbgemm_gpu / TBE embedding kernels are not GEMMs). The rest is the rule of expected.json's
'per_step_median_ms': a kernel belongs to the ProfilerStep#N whose CPU range holds its launch
(cuda_runtime/cuda_driver event with the same correlation id); step i runs from the first GPU
record of iteration i to the first of iteration i+1 (the last ProfilerStep only closes the one
before); per step, the union of each category's records clipped to the step; median over steps.

  python3 per_step_reaccount.py TRACES_DIR [--no-corrections] > per_step_reaccounted.json

With --no-corrections it reproduces expected.json's gemm/other medians (checked in
tests/trace_test.cc), which shows the method is the same; with the corrections it gives the
figures the classifier is now held to.
"""
import gzip, json, os, statistics, sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRACES = ["hta/ddp_v100x2_rank1__df_index_resolver.json.gz",
          "hta/a100x16_rank0__negative_queue_length_values_check.json.gz",
          "hta/a100x8_rank3__trace_diff_control.json.gz",
          "hta/a100x2_rank0_resnet__nccl_parser_config.json.gz"]


def table(corrections):
    ref = {}
    with open(os.path.join(HERE, "kernel_names_classified.tsv")) as f:
        next(f)
        for line in f:
            c = line.rstrip("\n").split("\t")
            ref[c[6]] = c[2]
    if corrections:
        with open(os.path.join(HERE, "kernel_names_corrections.tsv")) as f:
            for line in f:
                if line.startswith("#") or line.startswith("corrected_category"):
                    continue
                c = line.rstrip("\n").split("\t")
                if len(c) >= 3:
                    assert c[2] in ref, c[2][:80]
                    ref[c[2]] = c[0]
    return ref


def us_to_ns(v):
    # Exact decimal microseconds to integer nanoseconds (json gives float; the traces hold at
    # most 3 decimals).
    return int(round(float(v) * 1000))


def union(iv):
    iv.sort()
    out = []
    for s, e in iv:
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return sum(e - s for s, e in out)


def account(path, ref):
    d = json.load(gzip.open(path))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    launch = {}
    steps = []
    gpu = []
    for e in ev:
        if e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        a = e.get("args", {}) or {}
        if cat in ("cuda_runtime", "cuda_driver", "runtime", "driver") and "correlation" in a:
            launch[a["correlation"]] = us_to_ns(e["ts"])
        elif e.get("name", "").startswith("ProfilerStep#") and cat != "gpu_user_annotation":
            steps.append((us_to_ns(e["ts"]), us_to_ns(e["ts"]) + us_to_ns(e.get("dur", 0))))
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"):
            s = us_to_ns(e["ts"])
            if cat == "kernel":
                c = ref[e["name"]]
            else:
                c = "memory"
            gpu.append((s, s + max(0, us_to_ns(e.get("dur", 0))), c, a.get("correlation")))
    steps.sort()
    first = {}
    for s, e, c, corr in gpu:
        t = launch.get(corr)
        if t is None:
            continue
        for i, (a, b) in enumerate(steps):
            if a <= t < b:
                first[i] = min(first.get(i, s), s)
                break
    starts = [first[i] for i in sorted(first)]
    per = {"gemm": [], "other": [], "conv": [], "attention": [], "communication": [], "memory": []}
    for a, b in zip(starts, starts[1:]):
        by = {k: [] for k in per}
        for s, e, c, _ in gpu:
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                by["other" if c == "elementwise" else c].append((lo, hi))
        for k in per:
            per[k].append(union(by[k]) / 1e6)
    return {k: round(statistics.median(v), 4) for k, v in per.items()}


def main():
    root = sys.argv[1]
    ref = table("--no-corrections" not in sys.argv)
    out = {"_about": __doc__.strip().split("\n")[0] + (" (no corrections)" if "--no-corrections" in sys.argv else
                                                       " (corrections applied)"),
           "per_step_median_ms": {t: account(os.path.join(root, t), ref) for t in TRACES}}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
