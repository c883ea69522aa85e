"""The Python client against the second reliability review's inputs (issue 26, N5), tested as
the CLI is (tests/reliability_test.cc H2/H3/M10, tests/reliability2_test.cc): a stand-in server
that answers an unknown bottleneck kind, an unknown verdict or a PASS with a NaN step time, and
job files that are FIFOs, /dev/zero, YAML alias bombs, deep, NaN or not UTF-8. Needs no
`stepcast serve` (PYTHONPATH: build/python and plugin/python; STEPCAST_ROOT: the source tree).
Before the fix: ValueError on the enums, passed=True and a launched job for the NaN PASS, 60 s
and 3.6 GB for the bomb, MemoryError for /dev/zero, a FIFO blocked for ever."""

import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from concurrent import futures

import grpc

import stepcast_client as sc
from stepcast_client import FAIL, PASS, StepcastClient, load_job
from stepcast_client._proto.stepcast.v1 import prediction_pb2, service_pb2, service_pb2_grpc

ROOT = os.environ.get("STEPCAST_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
JOB = {"name": "x", "model": "llama3-8b", "hardware": "h100-sxm", "cluster": {"gpu_count": 8},
       "training": {"seq_length": 4096, "global_batch_size": 64, "micro_batch_size": 1}}


class _Fake(service_pb2_grpc.StepcastServiceServicer):
    """Answers every Predict and Preflight with the mode's prediction (fake_server.py's modes)."""

    mode = "ok"

    def _prediction(self):
        p = prediction_pb2.Prediction(job_name="j", model_name="m", hardware_name="h", gpu_count=8, step_time_s=1.0,
                                      mfu=0.5, tokens_per_step=1e6, tokens_per_s=1e6, model_flops_per_step=1e15,
                                      peak_flops_per_s_per_gpu=1e15, hfu=0.5)
        p.bottleneck.kind = 99 if self.mode == "enum" else prediction_pb2.BOTTLENECK_KIND_COMPUTE
        p.bottleneck.reason = "x"
        p.memory.fits = True
        p.memory.total_bytes, p.memory.capacity_bytes, p.memory.headroom_bytes = 40e9, 80e9, 40e9
        if self.mode == "nan":
            p.step_time_s = float("nan")
            p.mfu = float("nan")
        return p

    def Predict(self, request, context):
        return service_pb2.PredictResponse(prediction=self._prediction())

    def Preflight(self, request, context):
        r = service_pb2.PreflightResponse(prediction=self._prediction(), prediction_id="pred-x")
        r.verdict = 7 if self.mode == "verdict" else service_pb2.VERDICT_PASS
        r.reasons.add(rule="memory_fit", verdict=r.verdict, message="m")
        return r


class NewerOrForeignServer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fake = _Fake()
        cls.server = grpc.server(futures.ThreadPoolExecutor(4))
        service_pb2_grpc.add_StepcastServiceServicer_to_server(cls.fake, cls.server)
        cls.port = cls.server.add_insecure_port("127.0.0.1:0")
        cls.server.start()
        cls.client = StepcastClient(f"127.0.0.1:{cls.port}", timeout_s=10)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop(0)

    def test_unknown_bottleneck_kind_has_a_name(self):
        self.fake.mode = "enum"
        self.assertEqual(self.client.predict(JOB).bottleneck, "unknown(99)")
        r = self.client.preflight(JOB)
        self.assertEqual(r.prediction.bottleneck, "unknown(99)")
        self.assertEqual(r.verdict, PASS)

    def test_unknown_verdict_is_unspecified_not_an_exception(self):
        self.fake.mode = "verdict"
        r = self.client.preflight(JOB)
        self.assertEqual(r.verdict, sc.Verdict.UNSPECIFIED)
        self.assertEqual(sc.verdict_name(7), "unknown(7)")
        self.assertEqual(r.reasons[0].verdict, sc.Verdict.UNSPECIFIED)

    def test_nan_pass_is_fail(self):
        self.fake.mode = "nan"
        r = self.client.preflight(JOB, max_step_time_s=100)
        self.assertEqual(r.verdict, FAIL)
        self.assertFalse(r.passed)
        self.assertIn("non_finite", [x.rule for x in r.reasons])
        self.assertIn("prediction.step_time_s: is NaN", [x.message for x in r.reasons if x.rule == "non_finite"][0])
        self.assertEqual(r.proto.verdict, service_pb2.VERDICT_FAIL)

    def test_launcher_refuses_a_nan_pass(self):
        self.fake.mode = "nan"
        with tempfile.TemporaryDirectory() as d:
            job = os.path.join(d, "job.json")
            with open(job, "w") as f:
                import json

                json.dump(JOB, f)
            marker = os.path.join(d, "launched")
            cmd = [sys.executable, os.path.join(ROOT, "examples", "launch_with_preflight.py"), "--server",
                   f"127.0.0.1:{self.port}", "--job", job, "--", sys.executable, "-c",
                   f"open({marker!r}, 'w').write('x')"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
            self.assertFalse(os.path.exists(marker))
            self.assertIn("non_finite", r.stdout)

    def test_launcher_survives_an_unknown_enum(self):
        self.fake.mode = "enum"
        with tempfile.TemporaryDirectory() as d:
            job = os.path.join(d, "job.json")
            with open(job, "w") as f:
                import json

                json.dump(JOB, f)
            cmd = [sys.executable, os.path.join(ROOT, "examples", "launch_with_preflight.py"), "--server",
                   f"127.0.0.1:{self.port}", "--job", job, "--", sys.executable, "-c", "pass"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertNotIn("Traceback", r.stderr)


@unittest.skipUnless(os.environ.get("STEPCAST_BIN"), "needs STEPCAST_BIN (the stepcast binary)")
class Drain(unittest.TestCase):
    """N16: SIGTERM under 24 clients that keep calling (the review's drain.py): the calls that
    started after the signal were answered or UNAVAILABLE, but the Predict calls in flight at the
    final shutdown came back CANCELLED (12 of 24 in the review; 16 and 1 of 24 in two re-runs of
    the previous binary here). Now none is CANCELLED and no acknowledged report is lost."""

    def test_sigterm_under_load(self):
        import signal
        import sqlite3

        with tempfile.TemporaryDirectory() as work:
            port_file = os.path.join(work, "port")
            server = subprocess.Popen([os.environ["STEPCAST_BIN"], "serve", "--listen", "127.0.0.1:0", "--db",
                                       os.path.join(work, "s.db"), "--port-file", port_file, "--quiet"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(200):
                    if os.path.exists(port_file) and open(port_file).read().strip():
                        break
                    time.sleep(0.05)
                port = int(open(port_file).read())
                job = sc.job_from_dict(JOB)
                signalled, lock, codes, acked = [None], threading.Lock(), {}, []

                def loop(i):
                    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
                    stub = service_pb2_grpc.StepcastServiceStub(channel)
                    while True:
                        started = time.time()
                        try:
                            if i % 3 == 0:
                                r = stub.ReportRun(service_pb2.ReportRunRequest(job=job, measured_step_time_s=10,
                                                                                labels={"i": str(i)}), timeout=10)
                                with lock:
                                    acked.append(r.run.run_id)
                            else:
                                stub.Predict(service_pb2.PredictRequest(job=job), timeout=10)
                            code = "OK"
                        except grpc.RpcError as e:
                            code = e.code().name
                        if signalled[0] is not None and started >= signalled[0] - 0.05:
                            with lock:
                                codes[code] = codes.get(code, 0) + 1
                            if code != "OK":
                                break
                        if signalled[0] is not None and time.time() - signalled[0] > 8:
                            break
                    channel.close()

                threads = [threading.Thread(target=loop, args=(i,)) for i in range(24)]
                for t in threads:
                    t.start()
                time.sleep(2)
                signalled[0] = time.time()
                server.send_signal(signal.SIGTERM)
                self.assertEqual(server.wait(timeout=30), 0)
                for t in threads:
                    t.join(timeout=15)
            finally:
                if server.poll() is None:
                    server.kill()
            stored = {r[0] for r in sqlite3.connect(os.path.join(work, "s.db")).execute("select id from runs")}
            self.assertEqual(codes.get("CANCELLED", 0), 0, codes)
            self.assertEqual([a for a in acked if a not in stored], [])
            self.assertGreater(len(acked), 0)


class JobFiles(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name, text=None, data=None):
        p = os.path.join(self.dir.name, name)
        if text is not None:
            with open(p, "w") as f:
                f.write(text)
        if data is not None:
            with open(p, "wb") as f:
                f.write(data)
        return p

    def test_dev_zero_and_fifo_are_refused_without_reading(self):
        os.symlink("/dev/zero", os.path.join(self.dir.name, "zero.yaml"))
        for path in (os.path.join(self.dir.name, "zero.yaml"), "/dev/zero"):  # any name: not a text proto either
            t0 = time.time()
            with self.assertRaises(ValueError) as e:
                load_job(path)
            self.assertIn("not a regular file (a device)", str(e.exception))
            self.assertLess(time.time() - t0, 1.0)
        fifo = os.path.join(self.dir.name, "job.yaml")
        os.mkfifo(fifo)
        t0 = time.time()
        with self.assertRaises(ValueError) as e:
            load_job(fifo)
        self.assertIn("not a regular file (a FIFO)", str(e.exception))
        self.assertLess(time.time() - t0, 1.0)
        os.mkdir(os.path.join(self.dir.name, "d.yaml"))
        with self.assertRaises(ValueError) as e:  # a directory named like a job file is not one either
            load_job(os.path.join(self.dir.name, "d.yaml"))
        self.assertIn("not a regular file (a directory)", str(e.exception))
        with self.assertRaises(FileNotFoundError):
            load_job(os.path.join(self.dir.name, "missing.yaml"))

    def test_oversize_file_is_refused(self):
        p = self.path("big.yaml", text="#" * (sc.MAX_JOB_FILE_BYTES + 1))
        with self.assertRaises(ValueError) as e:
            load_job(p)
        self.assertIn("above the limit", str(e.exception))

    def test_yaml_alias_bomb_is_refused_quickly(self):
        bomb = os.path.join(ROOT, "tests", "data", "reliability_inputs", "yaml_alias_bomb_3k.yaml")
        t0 = time.time()
        with self.assertRaises(ValueError) as e:
            load_job(bomb)
        self.assertLess(time.time() - t0, 10.0)
        self.assertIn("expands to more than", str(e.exception))
        p = self.path("self.yaml", text="name: &a [*a]\n")
        with self.assertRaises(ValueError):
            load_job(p)

    def test_deep_nan_and_binary_files_are_clear_errors(self):
        deep = self.path("deep.json", text="[" * 100000 + "]" * 100000)
        with self.assertRaises(ValueError) as e:
            load_job(deep)
        self.assertIn("nested too deeply", str(e.exception))
        nan = self.path("nan.json", text='{"model": "llama3-8b", "training": {"dataset_tokens": NaN}}')
        with self.assertRaises(ValueError) as e:
            load_job(nan)
        self.assertIn("NaN is not a finite number", str(e.exception))
        nan_yaml = self.path("nan.yaml", text="model: llama3-8b\ntraining: {dataset_tokens: .nan}\n")
        with self.assertRaises(ValueError) as e:
            load_job(nan_yaml)
        self.assertIn("training.dataset_tokens: nan is not a finite number", str(e.exception))
        utf16 = self.path("utf16.yaml", data="model: llama3-8b\n".encode("utf-16"))
        with self.assertRaises(ValueError) as e:
            load_job(utf16)
        self.assertIn("not UTF-8", str(e.exception))
        with self.assertRaises(ValueError) as e:
            sc.job_from_dict(dict(JOB, cluster={"gpu_count": 8, "price_per_gpu_hour_usd": math.inf}))
        self.assertIn("cluster.price_per_gpu_hour_usd", str(e.exception))

    def test_arguments_are_named(self):
        with self.assertRaises(ValueError) as e:
            sc.job_from_command(["python", "pretrain_gpt.py"], gpus="abc", hardware="h100-sxm")
        self.assertIn("gpus: 'abc' is not a whole number", str(e.exception))
        c = StepcastClient("127.0.0.1:1", timeout_s=1)
        with self.assertRaises(ValueError) as e:
            c.preflight(JOB, warn_on_bottlenecks=["nope"])
        self.assertIn("warn_on_bottlenecks: unknown value 'nope'", str(e.exception))
        with self.assertRaises(ValueError) as e:
            c.search(JOB, objective="nope")
        self.assertIn("objective: unknown value 'nope'", str(e.exception))
        with self.assertRaises(ValueError) as e:
            c.predict(dict(JOB, name="x" * 5_000_000))
        self.assertIn("above gRPC's message limit", str(e.exception))
        c.close()

    def test_a_good_file_still_loads(self):
        spec = load_job(os.path.join(ROOT, "examples", "llama3-70b-h100.yaml"))
        self.assertEqual(spec.model.preset, "llama3-70b")


if __name__ == "__main__":
    unittest.main()
