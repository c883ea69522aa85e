#!/usr/bin/env python3
"""How `stepcast trace` scales with the size of a Kineto trace: time and peak RSS.

Builds a large trace from a real one (tests/data/real_data/traces/hta/a100x8_rank3__trace_diff_control.json.gz)
by repeating its events COPIES times, each copy shifted by the trace's span in time and by the
largest correlation id in ids (so launches still find their kernels), writes it gzip'ed, runs
`stepcast trace` on it under /usr/bin/time -v, and prints JSON bytes, GPU records, seconds and
peak RSS, and RSS per GPU record: the reader keeps only compact records, so RSS follows the GPU
record count, not the JSON size.

  python3 bench/trace_scale.py build/bin/stepcast 60    # ~2 GB of JSON
"""
import gzip, json, os, re, subprocess, sys, tempfile

stepcast, copies = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10
src = os.path.join(os.path.dirname(__file__), "..", "tests/data/real_data/traces/hta/a100x8_rank3__trace_diff_control.json.gz")
d = json.load(gzip.open(src))
events = d.pop("traceEvents")
ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
span = int(max(ts) - min(ts)) + 1000
max_corr = max(int(e.get("args", {}).get("correlation", 0)) for e in events) + 1
ids = ("correlation", "External id")
out = os.path.join(tempfile.mkdtemp(), "big.json.gz")
with gzip.open(out, "wt", compresslevel=1) as f:
    head = json.dumps(d)[:-1]
    f.write(head + ', "traceEvents": [\n')
    first = True
    for k in range(copies):
        for e in events:
            if isinstance(e.get("ts"), (int, float)):
                e2 = dict(e)
                e2["ts"] = e["ts"] + k * span
                if "args" in e:
                    a = dict(e["args"])
                    for key in ids:
                        if key in a and isinstance(a[key], int):
                            a[key] += k * max_corr
                    e2["args"] = a
                if isinstance(e.get("id"), int):
                    e2["id"] = e["id"] + k * max_corr
            else:
                if k > 0:
                    continue
                e2 = e
            f.write(("" if first else ",\n") + json.dumps(e2))
            first = False
    f.write("\n]}\n")
r = subprocess.run(["/usr/bin/time", "-v", stepcast, "trace", "--json", out], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit("stepcast trace failed: " + r.stderr[-2000:])
rep = json.loads(r.stdout)["ranks"][0]
secs = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", r.stderr).group(1)
rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
parts = [float(x) for x in secs.split(":")]
wall = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
recs = int(rep["gpu_records"])
print(f"copies {copies}: json {int(rep['json_bytes'])/1e9:.2f} GB (gzip {os.path.getsize(out)/1e6:.0f} MB), "
      f"{int(rep['trace_events'])} events, {recs} GPU records, {int(rep['launches'])} launches, "
      f"{len(rep['steps'])} steps; {wall:.1f} s, peak RSS {rss_kb/1024:.0f} MiB "
      f"({rss_kb*1024/recs:.0f} B per GPU record), {int(rep['json_bytes'])/wall/1e6:.0f} MB/s of JSON")
os.remove(out)
