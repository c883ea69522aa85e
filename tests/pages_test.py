#!/usr/bin/env python3
"""The --html pages in a real browser (Debian's chromium, headless).

For each page a command writes, this test:
  1. checks the file is self-contained: no script, no URL, nothing a browser would fetch;
  2. loads it in headless Chromium and requires no console message at all (the pages have no
     scripts, so any console line is a parse or load problem);
  3. counts, in the DOM Chromium parsed (--dump-dom), the marks the page writer labels
     (cli/html.h: class "pt" per scatter point, "bar" per bar segment, "cell" per heat-map
     cell, "curve" per curve) chart by chart, against counts computed independently from the
     same command's --json output;
  4. renders it to PNG (--screenshot) and decodes the PNG (zlib + the five PNG filters, no
     image library) to check it is not blank: many distinct colours, a real share of non-white
     pixels, and the solid fill colours the page must show.

    pages_test.py STEPCAST_BINARY SOURCE_DIR OUTPUT_DIR

The PNGs stay in OUTPUT_DIR for people to look at. chromium comes from
scripts/setup_test_deps.sh (the README's test command).
"""

import gzip
import html
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

STEPCAST, ROOT, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
del sys.argv[1:4]

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")

# Every flag keeps the browser off the network and away from any profile but a fresh one.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
]

# The solid fills of cli/html.cc's fixed colours (Tableau 10 blue = the GEMM term; the source
# palette's first colour), as RGB.
GEMM_BLUE = (0x4E, 0x79, 0xA7)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


def chromium(page, *args):
    """Runs headless Chromium on a file with a fresh profile; returns (stdout, stderr)."""
    with tempfile.TemporaryDirectory() as profile:
        r = run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, "file://" + os.path.abspath(page)])
    if r.returncode != 0:
        raise AssertionError(f"chromium exited {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout, r.stderr


MARKS = ("pt", "bar", "cell", "empty", "curve")


class Marks(html.parser.HTMLParser):
    """Per <svg> element: how many elements carry each class, and each mark (point, bar, cell,
    curve) with its classes, fill and <title>."""

    def __init__(self):
        super().__init__()
        self.svgs = []  # [{"classes": {class: n}, "fills": [..], "titles": [..]}]
        self.scripts = 0
        self.fetching = []  # (tag, attribute, value) that would make a browser fetch something
        self.style = ""
        self._in_style = False
        self._title_of = None  # the svg whose point's <title> is being read
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag in ("link", "img", "iframe", "object", "embed", "image", "use", "video", "audio", "source", "base"):
            self.fetching.append((tag, "", ""))
        for k, v in attrs:
            v = (v or "").lower()
            if k in ("src", "href", "xlink:href", "srcset", "data", "action", "poster", "background") or \
                    ("url(" in v and "url(#" not in v):
                self.fetching.append((tag, k, v))
        self._in_style = tag == "style"
        if tag == "svg":
            self.svgs.append({"classes": {}, "fills": [], "titles": [], "marks": []})
            return
        if not self.svgs:
            return
        svg = self.svgs[-1]
        classes = (a.get("class") or "").split()
        for c in classes:
            svg["classes"][c] = svg["classes"].get(c, 0) + 1
        if any(c in MARKS for c in classes):
            fill = a.get("stroke") if "hollow" in classes or "curve" in classes else a.get("fill")
            svg["marks"].append({"classes": classes, "fill": fill, "title": ""})
            self._title_of = svg
        if tag == "title" and self._title_of is not None:
            self._in_title = True

    def handle_endtag(self, tag):
        self._in_style = False
        if tag == "title":
            self._in_title = False
            self._title_of = None

    def handle_data(self, data):
        if self._in_style:
            self.style += data
        if self._in_title and self._title_of is not None:
            self._title_of["marks"][-1]["title"] += data


def parse_dom(text):
    m = Marks()
    m.feed(text)
    for svg in m.svgs:
        pts = [x for x in svg["marks"] if "pt" in x["classes"]]
        svg["fills"] = [x["fill"] for x in pts]
        svg["titles"] = [x["title"] for x in pts]
    return m


class TimelineSegments(html.parser.HTMLParser):
    """The step timeline's marks (cli/chart.h RenderTimeline), in document order: every element of
    class "tl" as (row, kind, op, start, end), every "tl-narrow" path as (row, kind, ops), and the
    row labels."""

    def __init__(self):
        super().__init__()
        self.segments, self.narrow, self.labels = [], [], []
        self._label = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "tl" in classes:
            self.segments.append((int(a["data-row"]), a["data-kind"], a["data-op"], float(a["data-start"]),
                                  float(a["data-end"])))
        if "tl-narrow" in classes:
            self.narrow.append((int(a["data-row"]), a["data-kind"], int(a["data-ops"])))
        self._label = "tl-row" in classes

    def handle_endtag(self, tag):
        self._label = False

    def handle_data(self, data):
        if self._label:
            self.labels.append(data)

    def ops(self, row):
        """The row's operations in order: (op, start of its first segment, end of its last)."""
        out = []
        for r, _, op, start, end in self.segments:
            if r != row or not op:
                continue
            if out and out[-1][0] == op:
                out[-1] = (op, out[-1][1], end)
            else:
                out.append((op, start, end))
        return out

    def kinds(self, row):
        return [(k, start, end) for r, k, _, start, end in self.segments if r == row]


def timeline(text):
    t = TimelineSegments()
    t.feed(text)
    return t


def decode_png(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise AssertionError(f"{path}: not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise AssertionError(f"{path}: unexpected PNG format depth={depth} colour={colour}")
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        filt = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            ul = prev[i - bpp] if i >= bpp else 0
            if filt == 1:
                line[i] = (line[i] + left) & 255
            elif filt == 2:
                line[i] = (line[i] + up) & 255
            elif filt == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif filt == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


class PageCase:
    """Shared checks; subclasses write one page and say what it must hold."""

    name = ""

    @classmethod
    def setUpClass(cls):
        if CHROMIUM is None:
            raise AssertionError("chromium not found: run scripts/setup_test_deps.sh (the README's test command)")
        os.makedirs(OUT, exist_ok=True)
        cls.page = os.path.join(OUT, cls.name + ".html")
        cls.png = os.path.join(OUT, cls.name + ".png")
        for p in (cls.page, cls.png):
            if os.path.exists(p):
                os.remove(p)
        cls.write_page()
        with open(cls.page, encoding="utf-8") as f:
            cls.text = f.read()
        cls.dom_text, cls.dom_log = chromium(cls.page, "--dump-dom")
        cls.dom = parse_dom(cls.dom_text)
        _, cls.shot_log = chromium(cls.page, "--screenshot=" + cls.png, "--window-size=1100,1600")

    def test_self_contained(self):
        # As written (names from user files may mention URLs as text; no element or style may
        # reference one) and as Chromium parsed it.
        for doc in (parse_dom(self.text), self.dom):
            self.assertEqual(doc.scripts, 0, "a <script> element")
            self.assertEqual(doc.fetching, [], "an element or attribute that fetches")
        written = parse_dom(self.text)
        self.assertIn("sans-serif", written.style)  # the inline CSS is there, with local fonts only
        style = written.style.lower()
        self.assertNotIn("@import", style)
        self.assertNotIn("url(", style)
        self.assertNotIn("@font-face", style)

    def test_no_console_messages(self):
        for log in (self.dom_log, self.shot_log):
            lines = [l for l in log.splitlines() if "CONSOLE" in l]
            self.assertEqual(lines, [], "console output while loading the page")

    def test_png_not_blank(self):
        width, height, rows = decode_png(self.png)
        self.assertEqual((width, height), (1100, 1600))
        colours, non_white = set(), 0
        self.colour_counts = {}
        for row in rows:
            for px in row:
                colours.add(px)
                if px != (255, 255, 255):
                    non_white += 1
                self.colour_counts[px] = self.colour_counts.get(px, 0) + 1
        self.assertGreater(len(colours), 50, "too few colours: a blank or unstyled page")
        self.assertGreater(non_white / (width * height), 0.05, "almost all white")
        for rgb, at_least in self.solid_colours():
            self.assertGreaterEqual(self.colour_counts.get(rgb, 0), at_least, f"colour {rgb} missing from the PNG")

    def solid_colours(self):
        return []

    def svg_counts(self, cls):
        return [s["classes"].get(cls, 0) for s in self.dom.svgs]


class PredictPage(PageCase, unittest.TestCase):
    name = "predict"

    @classmethod
    def write_page(cls):
        job = os.path.join(ROOT, "examples", "llama3-70b-h100.yaml")
        r = run([STEPCAST, "predict", job, "--html", cls.page])
        assert r.returncode == 0, r.stderr
        cls.report = r.stdout
        r = run([STEPCAST, "predict", job, "--json"])
        assert r.returncode == 0, r.stderr
        cls.prediction = json.loads(r.stdout)

    def test_bars(self):
        p = self.prediction
        terms = sum(1 for v in p["breakdown"].values() if v > 0)
        items = sum(1 for it in p["memory"]["items"] if it["bytes"] > 0)
        # Charts in order: step breakdown (one segment per non-zero term), memory items, and the
        # two bars of arithmetic intensity against machine balance.
        # The step timeline (no bars) sits between the breakdown and the memory.
        self.assertEqual(self.svg_counts("bar"), [terms, 0, items, 2])
        self.assertGreaterEqual(terms, 6)  # GEMM, attention, elementwise, TP, PP, bubble at least
        self.assertEqual(self.svg_counts("limit"), [0, 0, 1, 0])  # the capacity line

    def test_timeline(self):
        """One row per pipeline stage of the example (PP 8, VPP 5), each stage's forwards and
        backwards all drawn, and the step as interleaved 1F1B lays it out with every stage at the
        slowest stage's time: m t + (PP - 1) t / VPP + DP sync + optimizer, t the stage's seconds
        per micro-batch (Narayanan et al. 2021 Sec. 2.2.2), here from the JSON's breakdown."""
        p, b = self.prediction, self.prediction["breakdown"]
        pp, vpp, m = 8, 5, p["micro_batches_per_step"]  # examples/llama3-70b-h100.yaml
        self.assertEqual(m, 128 // 2)  # global batch 128, DP 2, micro-batch 1
        t = timeline(self.dom_text)
        self.assertEqual(t.labels, [f"stage {s}" for s in range(pp)])
        for s in range(pp):
            drawn = sum(n for r, _, n in t.narrow if r == s) + len(t.ops(s))
            self.assertEqual(drawn, 2 * m * vpp, f"stage {s}")
        per_mb = sum(b[k] for k in ("gemm_s", "attention_s", "elementwise_s", "recompute_s", "launch_overhead_s",
                                    "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s")) / m
        expected = m * per_mb + (pp - 1) * per_mb / vpp + b["dp_comm_s"] + b["optimizer_s"]
        ends = [end for _, kind, _, _, end in t.segments if kind == "optimizer"]
        self.assertEqual(len(ends), pp)
        for end in ends:
            self.assertAlmostEqual(end, expected, delta=expected * 1e-4)
        self.assertIn("forward_backward_pipelining_with_interleaving", self.dom_text)

    def test_text(self):
        p = self.prediction
        self.assertIn(p["job_name"], self.dom_text)
        kind = p["bottleneck"]["kind"].removeprefix("BOTTLENECK_KIND_").lower().replace("_", " ")
        self.assertIn(f"Bottleneck: {kind}", self.dom_text)
        self.assertIn(html.escape(p["bottleneck"]["reason"], quote=False), self.dom_text)
        for a in p["assumed_inputs"]:
            self.assertIn(a["field"], self.dom_text)
        self.assertIn("predict", self.report)  # the readable report still goes to stdout

    def solid_colours(self):
        return [(GEMM_BLUE, 2000)]  # the GEMM segment, most of the step


class ValidatePage(PageCase, unittest.TestCase):
    name = "validate"

    @classmethod
    def write_page(cls):
        csv = os.path.join(ROOT, "tests", "data", "validation", "published_runs.csv")
        r = run([STEPCAST, "validate", csv, "--html", cls.page])
        assert r.returncode == 0, r.stderr
        r = run([STEPCAST, "validate", csv, "--json"])
        assert r.returncode == 0, r.stderr
        cls.report = json.loads(r.stdout)

    def predicted_rows(self):
        return [row for row in self.report["rows"] if not row.get("skipped_reason")
                and row["measured_iter_time_s"] > 0 and row["predicted_iter_time_s"] > 0]

    def test_points(self):
        rows = self.predicted_rows()
        self.assertGreater(len(rows), 100)
        # The charts (log-log predicted vs measured, signed error, the interval coverage plot) carry
        # one point per row; the coverage plot one interval segment (a curve) per row too, hollow
        # where the row lies outside the validated region.
        self.assertEqual(self.svg_counts("pt"), [len(rows), len(rows), len(rows)])
        hollow = sum(1 for row in rows if not row["fits"])
        unvalidated = sum(1 for row in rows if not row["loso_interval"]["validated"])
        self.assertEqual(self.svg_counts("hollow"), [hollow, hollow, unvalidated])
        self.assertEqual(self.svg_counts("band"), [2, 2, 0])  # 10% and 25%
        self.assertEqual(self.svg_counts("curve")[2], len(rows))

    def test_one_colour_per_source(self):
        rows = self.predicted_rows()
        sources = sorted({row["source_id"] for row in rows})
        fills = self.dom.svgs[0]["fills"]
        by_source = {}
        # Map each point's title (it names the row and its source) to its fill.
        for title, fill in zip(self.dom.svgs[0]["titles"], fills):
            source = title.split("source ", 1)[1].split(":", 1)[0]
            by_source.setdefault(source, set()).add(fill)
        self.assertEqual(sorted(by_source), sources)
        for s, f in by_source.items():
            self.assertEqual(len(f), 1, f"source {s} drawn in {f}")
        self.assertEqual(len({next(iter(f)) for f in by_source.values()}), len(sources), "two sources share a colour")

    def test_hover_titles_name_every_row(self):
        ids = {row["row_id"] for row in self.predicted_rows()}
        named = {t.split(",", 1)[0].removeprefix("row ") for t in self.dom.svgs[0]["titles"]}
        self.assertEqual(named, ids)

    def test_per_source_table(self):
        for s in self.report["by_source"]:
            self.assertIn(f"<td>{s['source_id']}</td>", self.dom_text)
        p90 = self.report["summary"]["p90_abs_error_pct"]
        self.assertIn(f"{p90:.1f}%", self.dom_text)
        self.assertIn("leave-one-source-out", self.dom_text)

    def test_lean_table(self):
        # Each model kind and GPU with its median signed error, as the JSON gives it.
        groups = self.report["by_model_kind"] + self.report["by_hardware"]
        self.assertEqual({g["group"] for g in self.report["by_model_kind"]}, {"dense", "MoE"})
        for g in groups:
            self.assertIn(f"<td>{g['group']}</td>", self.dom_text)
            self.assertIn(f"{g['summary']['median_signed_error_pct']:+.1f}%", self.dom_text)


class HostileNamesPage(PageCase, unittest.TestCase):
    """Names come from user files: a job named with markup stays text."""

    name = "escaping"
    hostile = "<script>alert(1)</script><b>&\"'"

    @classmethod
    def write_page(cls):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"name": cls.hostile, "model": "llama3-8b", "hardware": "h100-sxm", "cluster": {"gpu_count": 8},
                       "training": {"seq_length": 8192, "global_batch_size": 32}}, f)
        r = run([STEPCAST, "predict", f.name, "--html", cls.page])
        os.unlink(f.name)
        assert r.returncode == 0, r.stderr

    def test_name_is_text(self):
        self.assertNotIn("<b>", self.dom_text)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;&amp;", self.dom_text)


def write_fixture_pages():
    """search.html and calibrate.html from tests/pages_test.cc (commands not wired yet)."""
    r = run([os.environ["PAGES_FIXTURE"], OUT, ROOT, *(f"{k}:{v}" for k, vs in CALIBRATION_INPUTS.items() for v in vs)])
    assert r.returncode == 0, r.stderr


# Published measurements the calibration page draws (tests/data/real_data/microbench).
NCCL = "tests/data/real_data/microbench/nccl/"
GEMM = "tests/data/real_data/microbench/gemm/"
CALIBRATION_INPUTS = {
    "intra": [NCCL + "01_h100x8_nvlink_dgx_allreduce.txt"],
    "inter": [NCCL + "14_h100x16_aws_p5_efa_allreduce.txt", NCCL + "06_h100x16_gcp_a3mega_allgather.txt"],
    "gemm": [GEMM + f for f in sorted(os.listdir(os.path.join(ROOT, GEMM))) if f.endswith("_GEMM.csv")],
}


def nccl_sizes(path):
    """Sizes in bytes of an nccl-tests log's data rows (size > 0, out-of-place time > 0), read here
    on their own."""
    sizes = []
    with open(os.path.join(ROOT, path)) as f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.split("<stdout>:")[-1].split()
            try:
                if len(fields) >= 8 and float(fields[0]) > 0 and float(fields[5]) > 0:
                    sizes.append(float(fields[0]))
            except ValueError:
                pass
    return sizes


def nccl_rows(path):
    """Number of data rows of an nccl-tests log."""
    return len(nccl_sizes(path))


SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def nccl_size_range(path):
    """(smallest, largest) size in bytes of an nccl-tests log's data rows."""
    sizes = nccl_sizes(path)
    return min(sizes), max(sizes)


def nccl_log_collective(path):
    """The collective of a fixture log, from its file name (..._allreduce.txt -> all_reduce)."""
    base = os.path.basename(path)
    for name, coll in (("allreduce", "all_reduce"), ("allgather", "all_gather"),
                       ("reducescatter", "reduce_scatter"), ("alltoall", "all_to_all")):
        if name in base:
            return coll
    raise AssertionError("no collective in " + base)


def nccl_title_collective(title):
    return title.split()[0]


def nccl_title_size(title):
    """Bytes of a point's hover title 'all_reduce x16 (8/node), 4 MiB: ...'."""
    value, unit = title.split(", ")[1].split(":")[0].split()
    return float(value) * SIZE_UNITS[unit]


def tracelens_bf16_rows(path):
    import csv
    with open(os.path.join(ROOT, path), newline="") as f:
        return sum(1 for row in csv.DictReader(f)
                   if "BFloat16" in row["param: dtype_A_B"] and float(row["TFLOPS/s_median"]) > 0)


class ComparePage(PageCase, unittest.TestCase):
    name = "compare"

    @classmethod
    def write_page(cls):
        cls.tmp = tempfile.mkdtemp()
        pred = os.path.join(cls.tmp, "pred.json")
        r = run([STEPCAST, "predict", "--json", os.path.join(ROOT, "examples", "llama3-70b-h100.yaml")])
        assert r.returncode == 0, r.stderr
        with open(pred, "w") as f:
            f.write(r.stdout)
        ranks = []
        for rank, step in ((0, 14.0), (1, 15.0)):
            path = os.path.join(cls.tmp, f"rank{rank}.json")
            busy = {"gemm_s": 9.5, "attention_s": 1.2, "communication_s": 2.0, "elementwise_s": 1.0,
                    "memory_copy_s": 0.1}
            with open(path, "w") as f:
                json.dump({"rank": rank, "rank_count": 1, "step_source": "nvtx:step", "warmup_steps": 2,
                           "steps": [{"step": s, "step_time_s": step, "busy": busy, "exposed_communication_s": 1.5,
                                      "idle_s": 0.8} for s in (2, 3)]}, f)
            ranks.append(path)
        job = os.path.join(ROOT, "examples", "llama3-70b-h100.yaml")
        r = run([STEPCAST, "compare", pred, *ranks, "--html", cls.page, "--job", job])
        assert r.returncode == 0, r.stderr
        r = run([STEPCAST, "compare", pred, *ranks, "--json"])
        assert r.returncode == 0, r.stderr
        cls.comparison = json.loads(r.stdout)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_terms_side_by_side(self):
        terms = self.comparison["terms"]
        self.assertGreaterEqual(len(terms), 4)
        pairs = sum(1 for t in terms if t["predicted_s"] > 0) + sum(1 for t in terms if t["measured_s"] > 0)
        bars = self.svg_counts("bar")[:2]  # then the step timeline (no bars)
        self.assertEqual(len(self.dom.svgs), 3)
        self.assertEqual(bars[1], pairs)
        # The two stacked steps: every non-zero term once per side, plus what the terms leave.
        self.assertGreaterEqual(bars[0], pairs)
        self.assertLessEqual(bars[0], pairs + 2)
        for t in terms:
            self.assertIn(html.escape(t["term"], quote=False), self.dom_text)
        self.assertIn(html.escape(self.comparison["largest_gap"], quote=False), self.dom_text)
        self.assertEqual(self.comparison["measured_step_time_s"], 15.0)  # the slowest rank sets the step
        self.assertIn("15 s", self.dom_text)

    def test_timeline_with_the_measured_step(self):
        """--job gives the layout: 8 stage rows, then the measured terms laid end to end (the trace
        analysis keeps no per-record timeline, and the page says so)."""
        t = timeline(self.dom_text)
        self.assertEqual(t.labels, [f"stage {s}" for s in range(8)] + ["measured (busy per term)"])
        measured = [(k, end - start) for k, start, end in t.kinds(8)]
        expected = [(x["term"], x["measured_s"]) for x in self.comparison["terms"] if x["measured_s"] > 0]
        self.assertEqual([k for k, _ in measured], [k for k, _ in expected])
        for (_, got), (_, want) in zip(measured, expected):
            self.assertAlmostEqual(got, want, delta=1e-5 * want)
        self.assertIn("not a per-record timeline", self.dom_text)

    def solid_colours(self):
        return [(GEMM_BLUE, 1000)]


class CompareTracePage(PageCase, unittest.TestCase):
    """`stepcast compare --html` with a real Kineto trace (HTA's a100x8 rank 3: ProfilerSteps, a
    compute stream, NCCL on its own stream, copies): the measured stream lanes of the median-length
    step beside the predicted stages. Checked against the trace's JSON read here independently:
    the GPU records overlapping the step's window (from `stepcast trace --json`) give the streams
    (one lane each) and the NCCL kernels, which must all be in the communication lane."""

    name = "compare-trace"
    trace = os.path.join(ROOT, "tests", "data", "real_data", "traces", "hta", "a100x8_rank3__trace_diff_control.json.gz")

    @classmethod
    def write_page(cls):
        cls.tmp = tempfile.mkdtemp()
        job = os.path.join(ROOT, "examples", "gpt-1.3b-pytorch-h100.yaml")
        pred = os.path.join(cls.tmp, "pred.json")
        r = run([STEPCAST, "predict", "--json", job])
        assert r.returncode == 0, r.stderr
        with open(pred, "w") as f:
            f.write(r.stdout)
        r = run([STEPCAST, "compare", pred, cls.trace, "--html", cls.page, "--job", job])
        assert r.returncode == 0, r.stderr
        r = run([STEPCAST, "trace", cls.trace, "--json"])
        assert r.returncode == 0, r.stderr
        cls.steps = json.loads(r.stdout)["ranks"][0]["steps"]
        # The median-length step: sorted by length, the one at (n - 1) // 2.
        order = sorted(range(len(cls.steps)), key=lambda i: cls.steps[i]["step_time_s"])
        cls.chosen = cls.steps[order[(len(order) - 1) // 2]]
        start, end = int(cls.chosen["start_ns"]), int(cls.chosen["end_ns"])
        with gzip.open(cls.trace, "rt") as f:
            events = json.load(f)["traceEvents"]
        cls.in_step = []  # (stream, name) of every GPU record overlapping the window
        for e in events:
            if e.get("ph") != "X" or e.get("cat", "").lower() not in ("kernel", "gpu_memcpy", "gpu_memset"):
                continue
            ts, dur = round(float(e["ts"]) * 1000), round(float(e.get("dur", 0)) * 1000)
            if ts < end and ts + dur > start and dur > 0:
                cls.in_step.append((int(e["args"]["stream"]), e["name"]))
        # The page's timelines, one parse per <svg>.
        with open(cls.page, encoding="utf-8") as f:
            text = f.read()
        cls.charts = [timeline(part) for part in text.split("<svg")[1:] if 'class="tl' in part]
        cls.marker2 = [float(m) for m in re.findall(r'class="marker2" data-at="([^"]+)"', text)]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_median_length_step(self):
        self.assertEqual(len(self.steps), 5)
        self.assertEqual(self.chosen["step"], 3)  # 75.47, 76.25, [76.79], 76.99, 78.52 ms
        self.assertIn(f"step {self.chosen['step']} (numbered from 0; 5 steps measured", self.dom_text)
        self.assertIn("the median-length step", self.dom_text)

    def test_lanes_one_per_stream_beside_the_stages(self):
        streams = sorted({s for s, _ in self.in_step})
        self.assertEqual(streams, [7, 20, 21, 22])
        shared, alone = self.charts[0], self.charts[1]
        # Shared axis: the stages, the busy-per-term row, then one lane per stream.
        lanes = [l for l in shared.labels if l.startswith("measured stream")]
        self.assertEqual(shared.labels[: len(shared.labels) - len(lanes) - 1][0], "stage 0")
        self.assertEqual(sorted(int(l.split()[2]) for l in lanes), streams)
        self.assertEqual(alone.labels, lanes)
        self.assertEqual(alone.labels, ["measured stream 7 (compute)", "measured stream 20 (compute)",
                                        "measured stream 21 (communication)", "measured stream 22 (copy)"])

    def test_communication_lane_holds_the_nccl_kernels(self):
        alone = self.charts[1]
        row = alone.labels.index("measured stream 21 (communication)")
        nccl = [n for s, n in self.in_step if "nccl" in n.lower()]
        self.assertGreater(len(nccl), 0)
        self.assertTrue(all(s == 21 for s, n in self.in_step if "nccl" in n.lower()))
        kinds = [k for k, _, _ in alone.kinds(row)]
        self.assertEqual(len(kinds), len(nccl))  # one rectangle per kernel: far below the merge bound
        self.assertEqual(set(kinds), {"communication"})
        # Every GPU record of the step is drawn once on its own scale (no merge note on the page).
        self.assertEqual(sum(len(alone.kinds(r)) for r in range(len(alone.labels))), len(self.in_step))
        self.assertNotIn("Measured lanes merged", self.dom_text)

    def test_step_length_is_the_analysis_step_time(self):
        want = self.chosen["step_time_s"]
        self.assertAlmostEqual(want, (int(self.chosen["end_ns"]) - int(self.chosen["start_ns"])) * 1e-9, places=12)
        self.assertEqual(len(self.marker2), 2)  # the shared axis and the lanes' own
        for at in self.marker2:
            self.assertAlmostEqual(at, want, delta=1e-9 * want)
        for chart in self.charts[:2]:
            ends = [e for r, l in enumerate(chart.labels) if l.startswith("measured stream") for _, _, e in chart.kinds(r)]
            self.assertLessEqual(max(ends), want * (1 + 1e-6))
        self.assertIn(f"{want * 1e3:.4g} ms from its first GPU record", self.dom_text)


class SearchPage(PageCase, unittest.TestCase):
    name = "search"

    @classmethod
    def write_page(cls):
        write_fixture_pages()

    def cells(self):
        return [m for m in self.dom.svgs[0]["marks"] if "cell" in m["classes"] or "empty" in m["classes"]]

    def test_grid(self):
        self.assertEqual(len(self.dom.svgs), 1)
        self.assertEqual(len(self.cells()), 5 * 4)  # PP 1..16 x TP 1..8
        self.assertGreater(self.svg_counts("cell")[0], 4)
        chosen = [m for m in self.cells() if "chosen" in m["classes"]]
        self.assertEqual(len(chosen), 1)

    def test_cards(self):
        # The fixture's grid: 20 TP x PP pairs, each cell one layout; the valid ones evaluated,
        # those that fit ranked (a value in the cell).
        valid = sum(1 for m in self.cells() if "no valid layout" not in m["title"])
        fit = self.svg_counts("cell")[0]
        self.assertIn(f'layouts evaluated</div><div class="value">{valid} of 20<', self.dom_text)
        self.assertIn(f'fit in memory, ranked</div><div class="value">{fit}<', self.dom_text)
        self.assertIn(f'ranked layouts shown</div><div class="value">{valid}<', self.dom_text)

    def test_chosen_is_the_fastest_and_matches_the_cli(self):
        chosen = [m for m in self.cells() if "chosen" in m["classes"]][0]["title"]
        layout = chosen.split("\n")[0]
        steps = [float(m["title"].split("step ")[1].split(" s")[0]) for m in self.cells() if "cell" in m["classes"]]
        step = float(chosen.split("step ")[1].split(" s")[0])
        self.assertEqual(step, min(steps))
        # The same layout through `stepcast predict` (the job file with that TP and PP).
        tp = int(layout.split("TP=")[1].split()[0])
        pp = int(layout.split("PP=")[1].split()[0])
        r = run([STEPCAST, "import", os.path.join(ROOT, "examples", "llama3-70b-h100.yaml")])
        self.assertEqual(r.returncode, 0, r.stderr)
        spec = json.loads(r.stdout)
        spec["parallelism"].update({"tp": tp, "pp": pp, "vpp": 1})
        spec["parallelism"].pop("dp", None)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        try:
            r = run([STEPCAST, "predict", "--json", f.name])
        finally:
            os.unlink(f.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertAlmostEqual(json.loads(r.stdout)["step_time_s"], step, delta=step * 1e-3)


class SearchCliPage(PageCase, unittest.TestCase):
    """`stepcast search --html` on the README's job with each overlap also off (--overlap-off): the
    cards count the search's evaluated and fitting layouts apart from the rows shown, every layout
    is listed once, and no two rows share a label (layouts differing only in TP overlap did)."""

    name = "search-cli"

    @classmethod
    def write_page(cls):
        job = os.path.join(ROOT, "examples", "llama3-70b-h100.yaml")
        args = [STEPCAST, "search", job, "--overlap-off", "--top", "50", "--quiet"]
        r = run([*args, "--html", cls.page])
        assert r.returncode == 0, r.stderr
        r = run([*args, "--json"])
        assert r.returncode == 0, r.stderr
        cls.result = json.loads(r.stdout)

    def listed(self):
        """Every distinct layout of the three lists, by its full JSON (every field)."""
        seen = []
        for key in ("top", "pareto", "best_per_gpu_count"):
            for x in self.result.get(key, []):
                layout = dict(x["layout"])
                layout.pop("summary", None)
                if layout not in seen:
                    seen.append(layout)
        return seen

    def test_cards(self):
        stats = self.result["stats"]
        evaluated, enumerated, fitting = (int(stats[k]) for k in ("evaluated", "enumerated", "fitting"))
        self.assertGreater(evaluated, 10000)
        self.assertIn(f'layouts evaluated</div><div class="value">{evaluated:,} of {enumerated:,}<', self.dom_text)
        self.assertIn(f'fit in memory, ranked</div><div class="value">{fitting:,}<', self.dom_text)
        self.assertIn(f'ranked layouts shown</div><div class="value">{len(self.listed()):,}<', self.dom_text)

    def test_labels_distinct(self):
        rows = [html.unescape(x) for x in re.findall(r'<td class="num">\d+</td><td>([^<]*)</td>', self.dom_text)]
        self.assertEqual(len(rows), min(20, len(self.listed())))
        self.assertEqual(len(set(rows)), len(rows), rows)
        # Layouts that differ only in TP communication overlap (--overlap-off lists both) carry
        # labels that say which is which; a row's counterpart may rank below the rows shown.
        self.assertTrue(any(r.endswith(" tp-overlap") or r.endswith(" no-tp-overlap") for r in rows), rows)


class TimelineCase(PageCase):
    """The hand-worked timelines of tests/pages_test.cc: PP 4, m 8, forward 1 s and backward 2 s
    per micro-batch and stage, DP sync 0.5 s, optimizer 0.25 s."""

    @classmethod
    def write_page(cls):
        write_fixture_pages()

    def test_rows(self):
        t = timeline(self.dom_text)
        self.assertEqual(t.labels, ["stage 0", "stage 1", "stage 2", "stage 3"])
        self.assertEqual(t.narrow, [])
        for s in range(4):
            self.assertEqual([op for op, _, _ in t.ops(s)], self.ORDER[s], f"stage {s}")

    def test_warmup(self):
        t = timeline(self.dom_text)
        for s, warmup in enumerate(self.WARMUP):
            names = [op for op, _, _ in t.ops(s)]
            first_backward = next(i for i, op in enumerate(names) if op.startswith("B"))
            self.assertEqual(first_backward - 1, warmup, f"stage {s}")  # the steady state starts with a forward

    def test_segments_and_step(self):
        t = timeline(self.dom_text)
        for s in range(4):
            kinds = t.kinds(s)
            # Each forward: forward, communication; each backward: backward, weight-gradient,
            # communication; idle time grey; then DP sync and optimizer once the last stage drains.
            self.assertEqual([k for k, _, _ in kinds[-2:]], ["dp-sync", "optimizer"])
            self.assertAlmostEqual(kinds[-2][1], self.DRAINED)
            self.assertAlmostEqual(kinds[-1][2], self.DRAINED + 0.75)
            body = [k for k, _, _ in kinds if k != "bubble"][:-2]
            pattern = []
            for op in self.ORDER[s]:
                pattern += ["forward", "communication"] if op[0] == "F" else ["backward", "weight-gradient", "communication"]
            self.assertEqual(body, pattern)
            busy = sum(end - start for k, start, end in kinds if k not in ("bubble", "dp-sync", "optimizer"))
            self.assertAlmostEqual(busy, 8 * 3)
            self.assertAlmostEqual(sum(end - start for k, start, end in kinds if k == "bubble"), self.DRAINED - 24)
        for (op, start, end), (want_op, want_start) in zip([t.ops(0)[0]] + [x for x in t.ops(0) if x[0][0] == "B"][:1],
                                                           self.STAGE0_STARTS):
            self.assertEqual(op, want_op)
            self.assertAlmostEqual(start, want_start)


def f1b_order(s, p=4, m=8):
    """1F1B (Megatron-LM schedules.py forward_backward_pipelining_without_interleaving), written out."""
    w = min(p - s - 1, m)
    return [f"F{k}.0" for k in range(w)] + \
        [x for i in range(m - w) for x in (f"F{w + i}.0", f"B{i}.0")] + [f"B{k}.0" for k in range(m - w, m)]


class Timeline1F1BPage(TimelineCase, unittest.TestCase):
    name = "timeline-1f1b"
    # Stage 0 by hand: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7; stage 3: F0 B0 F1 B1 ...
    ORDER = [f1b_order(s) for s in range(4)]
    WARMUP = [3, 2, 1, 0]
    # (m + p - 1)(tf + tb) = 11 x 3 (Narayanan et al. 2021 Sec. 2.2.1).
    DRAINED = 33.0
    # Stage 0's first forward at 0; its first backward waits for B0 on stages 3, 2, 1: F0 reaches
    # stage 3 at 3, ends at 4, then three backwards of 2 s: 4 + 2 x 3 = 10.
    STAGE0_STARTS = [("F0.0", 0.0), ("B0.0", 10.0)]

    def test_order_by_hand(self):
        self.assertEqual(self.ORDER[0], "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 F6.0 B3.0 F7.0 B4.0 B5.0 B6.0 B7.0".split())
        self.assertEqual(self.ORDER[3], [x for k in range(8) for x in (f"F{k}.0", f"B{k}.0")])


class TimelineInterleavedPage(TimelineCase, unittest.TestCase):
    name = "timeline-interleaved"
    # Stage 0 by hand (get_schedule_table with groups of PP = 4 micro-batches: chunk 0 of 0-3,
    # chunk 1 of 0-3, chunk 0 of 4-7, chunk 1 of 4-7; a backward's chunk is reversed): 10 warm-up
    # forwards ((4 - 0 - 1) x 2 + (2 - 1) x 4), 6 pairs, 10 cool-down backwards.
    STAGE0 = ("F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 "
              "F6.0 B0.1 F7.0 B1.1 F4.1 B2.1 F5.1 B3.1 F6.1 B0.0 F7.1 B1.0 "
              "B2.0 B3.0 B4.1 B5.1 B6.1 B7.1 B4.0 B5.0 B6.0 B7.0").split()
    WARMUP = [10, 8, 6, 4]
    # m (tf + tb) + (p - 1)(tf + tb) / v = 24 + 4.5 (Narayanan et al. 2021 Sec. 2.2.2).
    DRAINED = 28.5
    STAGE0_STARTS = [("F0.0", 0.0)]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        t = timeline(cls.dom_text)
        cls.ORDER = [[op for op, _, _ in t.ops(s)] for s in range(4)]

    def test_stage0_by_hand(self):
        self.assertEqual(self.ORDER[0], self.STAGE0)
        for s in range(4):
            ops = self.ORDER[s]
            self.assertEqual(sorted(ops), sorted(f"{d}{mb}.{c}" for d in "FB" for mb in range(8) for c in range(2)))


class CalibratePage(PageCase, unittest.TestCase):
    name = "calibrate"

    @classmethod
    def write_page(cls):
        write_fixture_pages()

    def test_points_per_chart(self):
        intra = sum(nccl_rows(p) for p in CALIBRATION_INPUTS["intra"])
        inter = sum(nccl_rows(p) for p in CALIBRATION_INPUTS["inter"])
        gemm = sum(tracelens_bf16_rows(p) for p in CALIBRATION_INPUTS["gemm"])
        self.assertGreater(intra, 20)
        self.assertGreater(inter, 20)
        self.assertGreater(gemm, 50)
        # busbw and time per scope, then GEMM rate against size.
        self.assertEqual(self.svg_counts("pt"), [intra, intra, inter, inter, gemm])
        curves = self.svg_counts("curve")
        # Each collective group has the model's curve; intra all_reduce and inter all_reduce also
        # the H100 reference profile's; the GEMM chart has the size fit.
        self.assertGreaterEqual(curves[0], 2)
        self.assertGreaterEqual(curves[2], 3)
        self.assertEqual(curves[4], 1)
        refs = self.svg_counts("ref")
        self.assertEqual(refs[0], 1)  # datasheet NVLink bandwidth
        self.assertEqual(refs[4], 2)  # bf16 datasheet peak, reference profile rate


class CalibrateImportPage(PageCase, unittest.TestCase):
    """What `stepcast-calibrate import` makes of the same logs: the profile's curves."""

    name = "calibrate-import"

    @classmethod
    def write_page(cls):
        write_fixture_pages()

    def test_points_per_chart(self):
        intra = sum(nccl_rows(p) for p in CALIBRATION_INPUTS["intra"])
        inter = sum(nccl_rows(p) for p in CALIBRATION_INPUTS["inter"])
        pts = self.svg_counts("pt")
        self.assertEqual(len(pts), 5)
        # The importer keeps each log's sizes as the curve's points (a size measured twice once).
        self.assertEqual(pts[0], pts[1])
        self.assertEqual(pts[2], pts[3])
        # Inside each log's own sizes the points are the log's (a size measured twice once);
        # outside them the merge keeps the reference profile's curve (gpu code review 2, N1).
        for chart, scope in ((0, "intra"), (2, "inter")):
            inside = 0
            for path in CALIBRATION_INPUTS[scope]:
                lo, hi = nccl_size_range(path)
                inside += sum(1 for t in self.dom.svgs[chart]["titles"]
                              if nccl_title_collective(t) == nccl_log_collective(path)
                              and lo <= nccl_title_size(t) <= hi)
            rows = intra if scope == "intra" else inter
            self.assertGreaterEqual(inside, rows * 0.9, scope)
            self.assertLessEqual(inside, rows, scope)
            self.assertGreaterEqual(pts[chart], inside, scope)
        self.assertGreater(pts[4], 40)  # shape-specific GEMM rates from the TraceLens tables
        self.assertGreaterEqual(self.svg_counts("curve")[0], 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
