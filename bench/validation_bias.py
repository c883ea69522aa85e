#!/usr/bin/env python3
"""Where the model's error leans: signed and absolute errors of `stepcast validate` by group.

Usage (after scripts/setup.sh):
  build/bin/stepcast validate ../shared/validation/published_runs.csv \
      --informed docs/validation_informed.yaml --json > /tmp/v.json
  bench/validation_bias.py /tmp/v.json ../shared/validation/published_runs.csv

Groups: the run's framework preset, its bottleneck, micro-batches per step (gradient accumulation,
from the CSV's layout: global batch / (micro-batch x DP)), and its measured step time. A group whose
signed median sits far from the whole set's names a cost the model lacks or overstates for that
kind of run (docs/VALIDATION.md, "Where the error leans"). Signed error = predicted / measured - 1:
negative = predicted too fast. Reads only the two files; prints plain text.
"""
import csv
import json
import statistics
import sys
from collections import defaultdict


def micro_batches_per_step(row):
    """GBS / (MBS x DP) from the CSV's layout columns, or None where a column is missing."""
    try:
        gpus = int(row["num_gpus"])
        model_parallel = 1
        for col in ("tp", "pp", "cp"):
            model_parallel *= int(row[col] or 1)
        dp = gpus // model_parallel
        return int(row["global_batch_seqs"]) // (int(row["micro_batch"]) * dp)
    except (KeyError, ValueError, ZeroDivisionError):
        return None


def ga_bucket(ga):
    if ga is None or ga < 1:
        return "unknown"
    if ga == 1:
        return "1"
    return "2-8" if ga <= 8 else ">8"


def step_bucket(seconds):
    for hi, name in ((1.0, "< 1 s"), (2.0, "1-2 s"), (5.0, "2-5 s"), (15.0, "5-15 s")):
        if seconds < hi:
            return name
    return ">= 15 s"


def line(name, errors, missing_s):
    signed = statistics.median(errors)
    absolute = statistics.median(abs(e) for e in errors)
    beyond = sum(1 for e in errors if abs(e) > 15)
    print(f"  {name:24s} n={len(errors):3d}  signed median {signed:+6.1f}%  |error| median {absolute:5.1f}%  "
          f"beyond 15%: {beyond:2d}  measured - predicted, median {statistics.median(missing_s):+.3f} s")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = [r for r in json.load(open(sys.argv[1]))["rows"] if r.get("predicted_iter_time_s")]
    csv_rows = {r["row_id"]: r for r in csv.DictReader(open(sys.argv[2]))}
    groups = {
        "framework preset": lambda r: r.get("framework") or "unknown",
        "bottleneck": lambda r: r.get("bottleneck") or "unknown",
        "micro-batches per step": lambda r: ga_bucket(micro_batches_per_step(csv_rows.get(r["row_id"], {}))),
        "measured step time": lambda r: step_bucket(r["measured_iter_time_s"]),
    }
    print(f"{len(rows)} predicted rows")
    line("all", [r["error_pct"] for r in rows], [r["measured_iter_time_s"] - r["predicted_iter_time_s"] for r in rows])
    for title, key in groups.items():
        print(f"by {title}:")
        by = defaultdict(list)
        for r in rows:
            by[key(r)].append(r)
        for name in sorted(by, key=lambda k: (-len(by[k]), k)):
            rs = by[name]
            line(name, [r["error_pct"] for r in rs], [r["measured_iter_time_s"] - r["predicted_iter_time_s"] for r in rs])


if __name__ == "__main__":
    main()
