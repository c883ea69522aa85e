#!/usr/bin/env python3
"""bench/validation_bias.py against a hand-worked example (ctest: validation_bias).

Five rows, values chosen so that every group's figures are computed here by hand:
  row  framework  GA  measured  predicted  error
  a    nemo       1   0.5 s     0.4 s      -20%   (short step, GA 1)
  b    nemo       2   0.8 s     0.72 s     -10%
  c    nemo       16  10 s      9.5 s       -5%
  d    paxml      1   3 s       3.3 s      +10%
  e    paxml      1   20 s      (not predicted: skipped)
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "validation_bias.py")


def row(rid, fw, measured, predicted):
    r = {"row_id": rid, "framework": fw, "bottleneck": "compute", "measured_iter_time_s": measured}
    if predicted is not None:
        r["predicted_iter_time_s"] = predicted
        r["error_pct"] = (predicted / measured - 1) * 100
    return r


def main():
    rows = [row("a", "nemo", 0.5, 0.4), row("b", "nemo", 0.8, 0.72), row("c", "nemo", 10.0, 9.5),
            row("d", "paxml", 3.0, 3.3), row("e", "paxml", 20.0, None)]
    # GA = GBS / (MBS x GPUs / (TP x PP x CP)).
    # (GPUs, TP, PP, CP, MBS, GBS): a 8/(1 x 8) = 1; b 32/(2 x 16/2) = 2; c 128/(1 x 8) = 16;
    # d 16/(2 x 8) = 1.
    layouts = {"a": (8, 1, 1, 1, 1, 8), "b": (16, 2, 1, 1, 2, 32), "c": (8, 1, 1, 1, 1, 128),
               "d": (8, 1, 1, 1, 2, 16), "e": (8, 1, 1, 1, 1, 8)}
    with tempfile.TemporaryDirectory() as d:
        jpath, cpath = os.path.join(d, "v.json"), os.path.join(d, "runs.csv")
        with open(jpath, "w") as f:
            json.dump({"rows": rows}, f)
        with open(cpath, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["row_id", "num_gpus", "tp", "pp", "cp", "micro_batch", "global_batch_seqs"])
            for rid, (gpus, tp, pp, cp, mbs, gbs) in layouts.items():
                w.writerow([rid, gpus, tp, pp, cp, mbs, gbs])
        out = subprocess.run([sys.executable, SCRIPT, jpath, cpath], capture_output=True, text=True, check=True).stdout
    # Each group line: two spaces, the group's name in 24 columns, then its figures.
    lines = {l[2:26].strip(): l for l in out.splitlines() if l.startswith("  ")}
    failures = []

    def expect(key, *parts):
        line = lines.get(key, "")
        for p in parts:
            if p not in line:
                failures.append(f"{key!r}: expected {p!r} in {line!r}")

    # All four predicted rows: errors -20, -10, -5, +10 -> median -7.5; |error| 20, 10, 5, 10 -> 10.0;
    # one beyond 15%; measured - predicted 0.1, 0.08, 0.5, -0.3 -> median 0.09.
    expect("all", "n=  4", "signed median   -7.5%", "|error| median  10.0%", "beyond 15%:  1", "+0.090 s")
    # nemo: -20, -10, -5 -> -10.0; paxml: +10.
    expect("nemo", "n=  3", "signed median  -10.0%", "beyond 15%:  1", "+0.100 s")
    expect("paxml", "n=  1", "signed median  +10.0%")
    # GA 1: a, d (-20, +10 -> -5.0; measured - predicted 0.1, -0.3 -> -0.1); 2-8: b; > 8: c.
    expect("1", "n=  2", "signed median   -5.0%", "|error| median  15.0%", "beyond 15%:  1", "-0.100 s")
    expect("2-8", "n=  1", "signed median  -10.0%")
    expect(">8", "n=  1", "signed median   -5.0%")
    if "unknown" in lines:
        failures.append("every row's GA is known here")
    # Step time: a, b under 1 s (-20, -10 -> -15.0); d 2-5 s; c 5-15 s.
    expect("< 1 s", "n=  2", "signed median  -15.0%", "+0.090 s")
    expect("2-5 s", "n=  1", "signed median  +10.0%")
    expect("5-15 s", "n=  1", "signed median   -5.0%")
    if "4 predicted rows" not in out:
        failures.append("the count of predicted rows (the unpredicted row e skipped)")
    if failures:
        print(out)
        print("\n".join(failures))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
