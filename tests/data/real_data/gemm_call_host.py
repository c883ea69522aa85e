#!/usr/bin/env python3
"""Host time of one cuBLAS GEMM call, from two real H100 PyTorch profiler traces.

  python3 tests/data/real_data/gemm_call_host.py > tests/data/real_data/gemm_call_host.json

Python standard library only, independent of stepcast. For each trace: the CPU duration of every
aten::mm and aten::addmm op (a cuBLAS / cuBLASLt GEMM: its descriptors, heuristic query, the
library's runtime calls and the launch, plus ATen's dispatch), and of the one-kernel elementwise
ops aten::mul, aten::add and aten::copy_ (ATen's dispatch plus one cudaLaunchKernel). ATen's
dispatch = the elementwise ops' median CPU time less the median launch call inside them; the
cuBLAS call = a GEMM op's median CPU time less that dispatch. The runtime calls made inside each op
(cuda_runtime / cuda_driver events on the op's thread within its span) are listed too. Both traces
ran with the profiler recording every op and runtime call, which adds to each (no correction).

Traces (both in this directory tree):
  traces/tracelens/h100_qwen1.5-0.5b_inference.json.gz  AMD-AGI/TraceLens @ 171dd747 (H100 80GB HBM3,
      HF Qwen1.5-0.5B inference, eager)
  traces/stepcast/h100_train_gpt_torch2.11.json.gz      measured by this project 2026-11-25 on an H100
      80GB HBM3 (torch 2.11, examples/train_gpt.py: eager training, forward and backward)
"""
import bisect, collections, gzip, json, os, statistics

HERE = os.path.dirname(os.path.abspath(__file__))
TRACES = {
    "h100_qwen1.5-0.5b_inference": "traces/tracelens/h100_qwen1.5-0.5b_inference.json.gz",
    "h100_train_gpt_torch2.11": "traces/stepcast/h100_train_gpt_torch2.11.json.gz",
}
GEMM_OPS = ["aten::mm", "aten::addmm"]
ELEMENTWISE_OPS = ["aten::mul", "aten::add", "aten::copy_"]
LAUNCH_CALLS = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"}


def analyse(path):
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    runtime = collections.defaultdict(list)
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "dur" in e:
            runtime[e["tid"]].append(e)
    starts = {}
    for tid, calls in runtime.items():
        calls.sort(key=lambda e: e["ts"])
        starts[tid] = [e["ts"] for e in calls]

    def inside(op):
        calls, ts = runtime.get(op["tid"], []), starts.get(op["tid"], [])
        i = bisect.bisect_left(ts, op["ts"])
        out = []
        while i < len(calls) and calls[i]["ts"] < op["ts"] + op["dur"]:
            out.append(calls[i])
            i += 1
        return out

    per_op = {}
    for name in GEMM_OPS + ELEMENTWISE_OPS:
        cpu, launch, calls = [], [], collections.Counter()
        for e in events:
            if e.get("cat") != "cpu_op" or e.get("name") != name or "dur" not in e:
                continue
            inner = inside(e)
            cpu.append(e["dur"])
            launch.extend(c["dur"] for c in inner if c["name"] in LAUNCH_CALLS)
            for c in inner:
                calls[c["name"]] += 1
        if not cpu:
            continue
        per_op[name] = {
            "ops": len(cpu),
            "cpu_us_median": statistics.median(cpu),
            "launch_call_us_median": statistics.median(launch) if launch else None,
            "runtime_calls_per_op": {k: round(v / len(cpu), 2) for k, v in sorted(calls.items())},
        }
    dispatch = statistics.median(
        [per_op[n]["cpu_us_median"] - per_op[n]["launch_call_us_median"] for n in ELEMENTWISE_OPS if n in per_op])
    gemm_call = {n: per_op[n]["cpu_us_median"] - dispatch for n in GEMM_OPS if n in per_op}
    return {"ops": per_op, "aten_dispatch_us": dispatch, "cublas_gemm_call_us": gemm_call}


def main():
    out = {"_source": __doc__.strip().splitlines()[0], "_computed_by": "tests/data/real_data/gemm_call_host.py",
           "traces": {}}
    calls = []
    for key, rel in TRACES.items():
        r = analyse(os.path.join(HERE, rel))
        out["traces"][key] = r
        calls.extend(r["cublas_gemm_call_us"].values())
    out["cublas_gemm_call_us_median"] = statistics.median(calls)
    out["cublas_gemm_call_us_range"] = [min(calls), max(calls)]
    print(json.dumps(out, indent=1, sort_keys=False))


if __name__ == "__main__":
    main()
