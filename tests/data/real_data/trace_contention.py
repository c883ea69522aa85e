#!/usr/bin/env python3
"""Contention reference: a kernel's duration beside communication vs the same kernel alone.

An implementation independent of stepcast's (plugin/trace/contention.cc), standard library only,
of the rule docs/TRACES.md states, so the C++ report is checked against it
(tests/trace_modules_test.cc, traces/contention_reference.json):

  python3 tests/data/real_data/trace_contention.py KEY TRACE.json.gz [TRACE2 ...] > out.json

  - categories by name from the reference tables (kernel_names_classified.tsv with
    kernel_names_corrections.tsv, kernel_names_new_traces.tsv); Memcpy/Memset records are memory;
  - an instance of gemm/attention/conv/elementwise is alone when no other GPU record overlaps
    it, overlapped when communication records cover >= 90% of it and no other record overlaps
    it, else not measured;
  - the communication kind: DeepEP by name (combine / dispatch / notify), NCCL by the kernel name,
    an NCCL SendRecv or Generic kernel by its 'Collective name' argument or the nccl:<collective>
    annotation around its launch on the launching thread;
  - KEY shape: same kernel = name + grid + block; KEY position: also the innermost user
    annotation at the launch (launching thread first, else any thread; else the ProfilerStep)
    and the occurrence of that name+grid+block in that range, in start order;
  - ratio = duration / median(alone durations) for kernels whose alone median is >= 20 us;
    groups (category, kind, GPU): count, kernels, median (linear interpolation), min, max.
"""
import bisect, collections, gzip, json, os, statistics, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def categories():
    cat = {}
    t = os.path.join(HERE, "traces")
    with open(os.path.join(t, "kernel_names_classified.tsv")) as f:
        next(f)
        for line in f:
            c = line.rstrip("\n").split("\t")
            cat[c[6]] = c[2]
    for fn, ci, ni in (("kernel_names_corrections.tsv", 0, 2), ("kernel_names_new_traces.tsv", 0, 4)):
        with open(os.path.join(t, fn)) as f:
            for line in f:
                if line.startswith("#") or line.startswith("corrected_category") or line.startswith("reference_category"):
                    continue
                c = line.rstrip("\n").split("\t")
                cat[c[ni]] = c[ci]
    return cat


def coll_from(s):
    s = s.lower().replace("nccl:", "").replace("_", "")
    for k, v in (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
                 ("alltoall", "all_to_all"), ("send", "send_recv"), ("recv", "send_recv"), ("broadcast", "broadcast")):
        if k in s:
            return v
    return ""


def kind_of(name):
    n = name.lower()
    if "dpsk::ep::" in n or "deep_ep::" in n:
        return "deepep_combine" if "combine" in n else "deepep_dispatch" if "dispatch" in n else "deepep_notify"
    c = coll_from(n.replace("sendrecv", "send"))
    return c if c else "other"


def ns(v):
    return int(round(float(v) * 1000))


def quantile(v, q):
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def innermost(ranges, t, tid=None):
    best = None
    for r in ranges:
        if (tid is None or r["tid"] == tid) and r["s"] <= t < r["e"]:
            if best is None or r["s"] > best["s"] or (r["s"] == best["s"] and r["e"] < best["e"]):
                best = r
    return best


def analyse(path, key, cat):
    d = json.load(gzip.open(path))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    gpus = {p["id"]: p["name"] for p in d.get("deviceProperties", [])} if isinstance(d, dict) else {}
    launch, anns, steps, nccl = {}, [], [], []
    recs = []
    for e in ev:
        if e.get("ph") != "X":
            continue
        c = str(e.get("cat", "")).lower()
        a = e.get("args", {}) or {}
        if c in ("cuda_runtime", "cuda_driver", "runtime", "driver") and "correlation" in a:
            launch[a["correlation"]] = (ns(e["ts"]), str(e.get("tid")))
        elif e.get("name", "").startswith("ProfilerStep#") and c != "gpu_user_annotation":
            steps.append({"s": ns(e["ts"]), "e": ns(e["ts"]) + ns(e.get("dur", 0))})
        elif c in ("user_annotation", "cpu_op", "python_function") and e.get("name", "").startswith("nccl:"):
            nccl.append({"s": ns(e["ts"]), "e": ns(e["ts"]) + ns(e.get("dur", 0)), "tid": str(e.get("tid")),
                         "name": e["name"]})
        if c == "user_annotation" and not e.get("name", "").startswith("ProfilerStep#"):
            anns.append({"s": ns(e["ts"]), "e": ns(e["ts"]) + ns(e.get("dur", 0)), "tid": str(e.get("tid")),
                         "name": e["name"], "id": len(anns)})
        if c in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"):
            s = ns(e["ts"])
            r = {"name": e["name"], "s": s, "e": s + max(0, ns(e.get("dur", 0))),
                 "cat": cat[e["name"]] if c == "kernel" else "memory", "stream": a.get("stream"),
                 "dev": a.get("device"), "corr": a.get("correlation"),
                 "shape": (json.dumps(a.get("grid")), json.dumps(a.get("block"))),
                 "collname": a.get("Collective name", "")}
            recs.append(r)
    recs.sort(key=lambda r: r["s"])
    steps.sort(key=lambda r: r["s"])
    for r in recs:
        if r["cat"] != "communication":
            continue
        k = kind_of(r["name"])
        if k in ("send_recv", "other") and not r["name"].lower().startswith(("void dpsk", "dpsk", "void deep_ep")):
            if coll_from(r["collname"]):
                k = coll_from(r["collname"])
            elif r["corr"] in launch:
                t, tid = launch[r["corr"]]
                a = innermost(nccl, t, tid)
                if a and coll_from(a["name"]):
                    k = coll_from(a["name"])
        r["kind"] = k
    # Keys.
    seen = collections.Counter()
    for r in recs:
        r["key"] = (r["name"], r["shape"])
        if key != "position" or r["corr"] not in launch:
            continue
        t, tid = launch[r["corr"]]
        a = innermost(anns, t, tid) or innermost(anns, t)
        if a is not None:
            cont, cname = ("a", a["id"]), ("a", a["name"])
        else:
            st = [i for i, x in enumerate(steps) if x["s"] <= t < x["e"]]
            if not st:
                continue
            cont, cname = ("s", st[-1]), ("s",)
        occ = seen[(cont, r["name"], r["shape"])]
        seen[(cont, r["name"], r["shape"])] += 1
        r["key"] = (r["name"], r["shape"], cname, occ)
    starts = [r["s"] for r in recs]
    maxdur = max(r["e"] - r["s"] for r in recs)
    alone = collections.defaultdict(list)
    over = collections.defaultdict(list)
    for i, r in enumerate(recs):
        d = r["e"] - r["s"]
        if r["cat"] not in ("gemm", "attention", "conv", "elementwise") or d <= 0:
            continue
        lo_i = bisect.bisect_left(starts, r["s"] - maxdur)
        comm, kinds, other = [], collections.defaultdict(list), False
        for j in range(lo_i, len(recs)):
            x = recs[j]
            if x["s"] >= r["e"]:
                break
            if j == i:
                continue
            lo, hi = max(x["s"], r["s"]), min(x["e"], r["e"])
            if hi <= lo:
                continue
            if x["cat"] == "communication":
                comm.append((lo, hi))
                kinds[x["kind"]].append((lo, hi))
            else:
                other = True
        if other:
            continue
        if not comm:
            alone[r["key"]].append(d)
            continue

        def cover(v):
            v = sorted(v)
            tot, cs, ce = 0, None, None
            for s, e in v:
                if ce is None or s > ce:
                    if ce is not None:
                        tot += ce - cs
                    cs, ce = s, e
                else:
                    ce = max(ce, e)
            return tot + (ce - cs)
        if cover(comm) < 0.9 * d:
            continue
        kind = max(sorted(kinds), key=lambda k: cover(kinds[k]))
        over[r["key"]].append((d, kind, r))
    groups = collections.defaultdict(lambda: {"ratios": [], "keys": set()})
    for k, v in over.items():
        if k not in alone:
            continue
        ref = statistics.median(alone[k])
        if ref < 20000:
            continue
        for d, kind, r in v:
            g = groups[(r["cat"].replace("conv", "convolution"), kind, gpus.get(r["dev"], "unknown GPU"))]
            g["ratios"].append(d / ref)
            g["keys"].add(k)
    out = []
    for (c, k, gpu), g in sorted(groups.items()):
        out.append({"category": c, "communication_kind": k, "gpu": gpu, "instances": len(g["ratios"]),
                    "kernels": len(g["keys"]), "median_ratio": quantile(g["ratios"], 0.5),
                    "min_ratio": min(g["ratios"]), "max_ratio": max(g["ratios"])})
    return out


def main():
    key = sys.argv[1]
    cat = categories()
    out = {"_about": "trace_contention.py " + key + " (an independent implementation; see its docstring)",
           "key": key, "traces": {}}
    for p in sys.argv[2:]:
        out["traces"][os.path.basename(p)] = analyse(p, key, cat)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
