#!/usr/bin/env python3
"""Independent accounting of the communication wait between the 8 PARAM DLRM ranks
(traces/param/param_dlrm_v100x8_rank{0..7}.json.gz), for `stepcast trace`'s straggler analysis.

Standard library only; shares no code with stepcast. Written from the traces themselves:
  - the NCCL kernels of each rank are the events with cat "kernel" whose name starts with
    "ncclKernel_" (all on stream 84 in these files; the traces carry no process group argument);
  - the i-th NCCL kernel of a given NCCL kernel name on a rank is collective instance i of that name
    (NCCL issues a communicator's collectives in the same order on every rank; SendRecv is the
    all_to_all here, AllReduce the all_reduce);
  - the arrival of a rank is its kernel's ts; in each instance the latest arrival is the largest ts
    (ties: lowest rank) and every other rank waits min(latest ts - own ts, own dur) microseconds,
    attributed to the latest rank;
  - each file holds one ProfilerStep#10 and every NCCL kernel is launched inside it (checked below
    through the cuda_runtime launch with the same correlation), so every instance is in step 0;
  - critical lateness = the sum over instances of the largest wait in each.
Writes straggler_reference.json next to this script (microseconds, integers: the traces' ts and dur
are integer microseconds).

Usage: python3 straggler_reaccount.py [TRACE_DIR]   (default: param/ next to this script)
"""
import collections
import gzip
import json
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
trace_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "param")

kernels = {}  # rank -> list of (name, ts, dur)
for rank in range(8):
    with gzip.open(os.path.join(trace_dir, f"param_dlrm_v100x8_rank{rank}.json.gz"), "rt") as f:
        trace = json.load(f)
    assert trace["distributedInfo"]["rank"] == rank
    events = trace["traceEvents"]
    step = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
            and e.get("cat") != "gpu_user_annotation"]
    assert len(step) == 1, (rank, len(step))
    s0, s1 = step[0]["ts"], step[0]["ts"] + step[0]["dur"]
    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    nccl = sorted((e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_")),
                  key=lambda e: e["ts"])
    for e in nccl:
        assert s0 <= launch[e["args"]["correlation"]] < s1, (rank, e["ts"])
        assert e["args"]["stream"] == 84
    kernels[rank] = [(e["name"].split("(")[0], e["ts"], e["dur"]) for e in nccl]

names = sorted({k[0] for ks in kernels.values() for k in ks})
wait = collections.Counter()
comm = collections.Counter()
waited_for = collections.defaultdict(collections.Counter)
caused = collections.Counter()
last_in = collections.Counter()
critical = 0
instances = []
for name in names:
    per_rank = {r: [k for k in kernels[r] if k[0] == name] for r in range(8)}
    count = len(per_rank[0])
    assert all(len(v) == count for v in per_rank.values()), name
    for i in range(count):
        starts = {r: per_rank[r][i][1] for r in range(8)}
        durs = {r: per_rank[r][i][2] for r in range(8)}
        latest = max(range(8), key=lambda r: (starts[r], -r))
        largest = 0
        for r in range(8):
            comm[r] += durs[r]
            if r == latest:
                continue
            w = min(max(0, starts[latest] - starts[r]), durs[r])
            wait[r] += w
            waited_for[r][latest] += w
            caused[latest] += w
            largest = max(largest, w)
        last_in[latest] += 1
        critical += largest
        instances.append({"kernel": name, "index": i, "starts_us": [starts[r] for r in range(8)],
                          "latest_rank": latest, "largest_wait_us": largest})

# For comparison, HTA's own straggler metric re-read in stdlib Python (HTA itself needs pandas, not
# installed here): facebookresearch/HolisticTraceAnalysis @ f4d0062c, hta/analyzers/straggler.py,
# _compute_normalized_start_time_of_significant_comm_kernels + _get_top_k_stragglers_with_metric
# (n_stragglers=2): NCCL kernels on stream > 0 lasting >= 1% of the mean iteration time (GPU span of
# all ranks / iterations), the last one per (rank, stream, name), the (stream, name) whose normalized
# duration varies most across ranks, then the 2 ranks whose kernel of it starts latest.
gpu = []
for rank in range(8):
    with gzip.open(os.path.join(trace_dir, f"param_dlrm_v100x8_rank{rank}.json.gz"), "rt") as f:
        for e in json.load(f)["traceEvents"]:
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                gpu.append((rank, e["ts"], e["dur"], e["args"].get("stream", -1), e["name"]))
t_min = min(g[1] for g in gpu)
mean_iter = max(g[1] + g[2] for g in gpu) - t_min  # one iteration (ProfilerStep#10) per file
last_long = {}
for g in sorted(gpu, key=lambda g: g[1]):
    if g[3] > 0 and g[2] >= 0.01 * mean_iter and g[4].startswith("ncclKernel"):
        last_long[(g[0], g[3], g[4])] = g
by_kernel = collections.defaultdict(list)
for (r, st, name), g in last_long.items():
    by_kernel[(st, name)].append(g[2] / mean_iter)
std = {k: (statistics.stdev(v) if len(v) > 1 else 0.0) for k, v in by_kernel.items()}
chosen = max(std, key=std.get)
late = sorted(((g[1] - t_min) / mean_iter, r) for (r, st, name), g in last_long.items() if (st, name) == chosen)
hta_top2 = sorted(r for _, r in late[-2:])

ranks = []
for r in range(8):
    most = max(waited_for[r].items(), key=lambda kv: (kv[1], -kv[0])) if waited_for[r] else (-1, 0)
    ranks.append({"rank": r, "collectives": sum(1 for _ in range(len(kernels[r]))), "communication_us": comm[r],
                  "wait_us": wait[r], "mostly_waited_for_rank": most[0], "waited_for_that_rank_us": most[1],
                  "arrived_last": last_in[r], "others_waited_for_it_us": caused[r]})
slowest = max(range(8), key=lambda r: (caused[r], -r))
out = {"source": "straggler_reaccount.py on traces/param/param_dlrm_v100x8_rank{0..7}.json.gz",
       "collectives": len(instances), "ranks": ranks, "slowest_rank": slowest,
       "slowest_rank_caused_wait_us": caused[slowest], "critical_lateness_us": critical,
       "hta_late_start_top2": {"kernel": chosen[1].split("(")[0], "stream": chosen[0], "ranks": hta_top2},
       "instances": instances}
with open(os.path.join(here, "straggler_reference.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(json.dumps({k: v for k, v in out.items() if k != "instances"}, indent=1))
