#!/usr/bin/env python3
"""A new rate profile against the previous measured one of the same hardware (issue 25), on the GPU
machine after a calibration: per GEMM shape both have, new/old rate (median, min, max over the
shapes, per dtype); HBM new/old; the new profile's contention figures.

Usage: compare_profiles.py NEW.json PREVIOUS.json...   (the latest PREVIOUS of NEW's hardware is used)
"""
import json
import statistics
import sys


def main(argv):
    new = json.load(open(argv[1]))
    for c in new.get("contention", []):
        print("profile contention", c["compute"], c["communication"], c["slowdown"], c["source"][:90])
    olds = [p for p in (json.load(open(f)) | {"_file": f} for f in argv[2:]) if p.get("hardware") == new.get("hardware")]
    if not olds:
        print("against the previous profile: none of hardware", new.get("hardware"))
        return 0
    old = sorted(olds, key=lambda p: p["_file"])[-1]
    key = lambda g: (g["dtype"], g.get("m", "0"), g.get("n", "0"), g.get("k", "0"))
    o = {key(g): g["flops_per_s"] for g in old["gemm"]}
    by = {}
    for g in new["gemm"]:
        if key(g) in o and o[key(g)] > 0:
            by.setdefault(g["dtype"], []).append(g["flops_per_s"] / o[key(g)])
    print("against", old["_file"], "(new / old)")
    for d, r in sorted(by.items()):
        print(f"  GEMM {d}: {len(r)} shapes, median {statistics.median(r):.3f}, min {min(r):.3f}, max {max(r):.3f}")
    print(f"  HBM: {new['hbm_bandwidth_bytes_per_s'] / old['hbm_bandwidth_bytes_per_s']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
