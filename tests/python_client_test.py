"""The Python client and the example launcher wrapper against a live `stepcast serve`
(started by tests/service_e2e_test.sh, which sets STEPCAST_SERVER and STEPCAST_TOKEN)."""

import os
import subprocess
import sys
import tempfile
import unittest

import grpc

from stepcast_client import (FAIL, PASS, WARN, StepcastClient, format_interval, format_suggestion, job_from_dict,
                             load_job)

SERVER = os.environ["STEPCAST_SERVER"]
TOKEN = os.environ["STEPCAST_TOKEN"]
ROOT = os.environ["STEPCAST_ROOT"]

# Llama 3 70B on 64 H100s (the README's example), as a launcher would build it.
JOB = {
    "name": "py-llama70b",
    "framework": "megatron-bridge",
    "model": "llama3-70b",
    "hardware": "h100-sxm",
    "cluster": {"name": "py-cluster", "gpu_count": 64},
    "parallelism": {"tp": 4, "pp": 8, "vpp": 5, "sequence_parallel": True},
    "training": {"seq_length": 8192, "global_batch_size": 128, "sharding": "zero1", "precision": {"gemm": "bf16"}},
}
OOM_JOB = {
    "model": "llama3-405b",
    "hardware": "h100-sxm",
    "cluster": {"gpu_count": 8},
    "training": {"seq_length": 8192, "global_batch_size": 8},
}


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = StepcastClient(SERVER, token=TOKEN)

    def tearDown(self):
        self.client.close()

    def test_preflight_report_and_list(self):
        resp = self.client.preflight(job_from_dict(JOB), min_mfu=0.1)
        self.assertEqual(resp.verdict, PASS, resp)
        self.assertTrue(resp.prediction_id.startswith("pred-"))
        self.assertGreater(resp.prediction.step_time_s, 0)
        run = self.client.report_run(prediction_id=resp.prediction_id,
                                     measured_step_time_s=resp.prediction.step_time_s * 1.1,
                                     labels={"source": "python-test"})
        self.assertAlmostEqual(run.step_time_error_pct, (1 / 1.1 - 1) * 100, places=6)
        self.assertAlmostEqual(run.measured_mfu, resp.prediction.mfu / 1.1, places=9)
        runs = self.client.list_runs(label="source=python-test")
        self.assertIn(run.run_id, [r.run_id for r in runs])
        self.assertEqual(self.client.get_run(run.run_id).cluster, "py-cluster")

    @unittest.skipUnless(os.environ.get("STEPCAST_BIN"), "needs the stepcast binary (STEPCAST_BIN)")
    def test_report_run_from_a_training_log(self):
        # Megatron-Bridge log: 14820.0 (warm-up) | 3410.0, 3380.0, 3400.0 ms; 98.0 | 421.7, 425.3,
        # 422.9 TFLOP/s/GPU (tests/data/training_logs/megatron_bridge.log): medians 3.4 s, 422.9.
        job = job_from_dict(dict(JOB, training=dict(JOB["training"], global_batch_size=16)))
        log = os.path.join(ROOT, "tests/data/training_logs/megatron_bridge.log")
        run = self.client.report_run(job=job, log=log, labels={"team": "py-log"})
        self.assertAlmostEqual(run.measured_step_time_s, 3.4, places=12)
        self.assertEqual(run.labels["source"], "training-log:megatron")
        self.assertEqual(run.labels["team"], "py-log")
        f = run.proto.framework_reported
        self.assertEqual((f.framework, f.iterations, f.warmup_records), ("megatron", 3, 1))
        self.assertAlmostEqual(f.tflops_per_gpu, 422.9, places=12)
        # With the job, the binary converts 422.9 TFLOP/s/GPU under Megatron's 2025 count (the log
        # is dated 2025-09-01): Megatron-LM transformer_flops per token for Llama 3 70B (L 80, h 8192,
        # 64 query / 8 KV heads of 128, SwiGLU FFN 28672, vocabulary 128256) at s = 8192:
        # 6 L [h (q + 2 kv) + q s + q h] + 6 L 3 h f + 6 h V, over 16 x 8192 tokens and 64 GPUs.
        L, h, q, kv, s, ffn, V = 80, 8192, 64 * 128, 8 * 128, 8192, 28672, 128256
        per_token = 6 * L * (h * (q + 2 * kv) + q * s + q * h) + 6 * L * 3 * h * ffn + 6 * h * V
        self.assertEqual(f.flop_convention, "megatron-2025")
        self.assertAlmostEqual(f.converted_step_time_s, per_token * 16 * 8192 / (422.9e12 * 64), places=9)
        self.assertGreater(f.converted_mfu, 0)
        with self.assertRaises(ValueError):
            self.client.report_run(job=job, log=log, measured_step_time_s=3.0)
        with tempfile.NamedTemporaryFile("w", suffix=".log") as bad:
            bad.write(" iteration 1/ 9 | elapsed time per iteration (ms): 1.0 |\n"
                      " iteration 2/ 9 | elapsed time per iteration (ms): -4 |\n")
            bad.flush()
            with self.assertRaisesRegex(ValueError, "line 2: elapsed time per iteration"):
                self.client.report_run(job=job, log=bad.name)

    def test_preflight_suggests_a_layout_that_fits(self):
        job = dict(JOB, parallelism={"tp": 1, "pp": 1}, training={"seq_length": 8192, "global_batch_size": 128})
        resp = self.client.preflight(job_from_dict(job))
        self.assertEqual(resp.verdict, FAIL)
        self.assertEqual(resp.suggestion.reason, "does_not_fit")
        self.assertTrue(resp.suggestion.suggested.prediction.memory.fits)
        self.assertEqual(resp.suggestion.suggested.prediction.gpu_count, 64)
        text = format_suggestion(resp)
        self.assertIn("suggested:", text)
        self.assertGreater(len(resp.suggestion.suggested.changes), 0)
        self.assertIn(resp.suggestion.suggested.changes[0].field + ": ", text)
        # Nothing fits on 8 GPUs: no suggestion, and nothing printed.
        self.assertFalse(self.client.preflight(job_from_dict(OOM_JOB)).HasField("suggestion"))

    def test_search(self):
        result = self.client.search(job_from_dict(JOB), top_n=3)
        self.assertEqual(len(result.top), 3)
        self.assertFalse(result.partial)
        self.assertLessEqual(result.top[0].prediction.step_time_s, result.top[1].prediction.step_time_s)
        self.assertTrue(all(c.prediction.memory.fits for c in result.top))
        self.assertGreater(result.stats.evaluated, 1000)
        self.assertEqual(result.submitted.layout.parallelism.tp, 4)
        # Past the call's deadline the service answers in time with the best found so far: an OK,
        # partial answer (the server's work deadline is the call's less a margin), never the
        # client's own DEADLINE_EXCEEDED (tests review c1; ServiceTest.SearchAnswersWithinThe
        # CallDeadlineWithTheBestSoFar checks the same in C++).
        # The job with a global batch of 16,384 sequences: its space over 8..16,384 GPUs takes about
        # 4 s on 2 threads (`stepcast search --gpus 8..16384`: 3.9 s here, 2026-11-28), where the
        # 128-sequence batch took 2.7 s, about the 3 s call's work deadline (2.7 s), so that a
        # faster machine could finish it and answer complete.
        big = dict(JOB, training=dict(JOB["training"], global_batch_size=16384))
        with StepcastClient(SERVER, token=TOKEN, timeout_s=3.0) as quick:
            r = quick.search(job_from_dict(big), min_gpus=8, max_gpus=16384, top_n=2)
            self.assertTrue(r.partial, r.stats)
            self.assertIn("deadline", r.partial_reason)
            self.assertTrue(r.top[0].prediction.memory.fits)
        r = self.client.search(job_from_dict(JOB), min_gpus=8, max_gpus=16384, time_limit_s=0.3)
        self.assertTrue(r.partial)
        with self.assertRaises(grpc.RpcError) as e:
            self.client.search(job_from_dict(OOM_JOB))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("job.cluster.gpu_count: no layout", e.exception.details())

    def test_limit_inside_the_interval_warns(self):
        # docs/VALIDATION.md "Intervals": a limit inside the 80% interval WARNs with both numbers;
        # only a limit the whole interval breaks FAILs.
        p = self.client.predict(job_from_dict(JOB))
        self.assertLess(p.step_time_low_s, p.step_time_high_s)
        self.assertTrue(p.interval_validated)
        inside = self.client.preflight(job_from_dict(JOB), max_step_time_s=(p.step_time_low_s + p.step_time_high_s) / 2)
        self.assertEqual(inside.verdict, WARN, inside.reasons)
        reason = [r for r in inside.reasons if r.rule == "max_step_time_s"][0]
        self.assertEqual(reason.verdict, WARN)
        self.assertIn("inside the 80% interval", reason.message)
        below = self.client.preflight(job_from_dict(JOB), max_step_time_s=0.9 * p.step_time_low_s)
        self.assertEqual(below.verdict, FAIL)
        self.assertIn("80% interval", format_interval(p))

    def test_oom_is_a_fail_verdict(self):
        resp = self.client.preflight(job_from_dict(OOM_JOB))
        self.assertEqual(resp.verdict, FAIL)
        self.assertEqual(resp.reasons[0].rule, "memory_fit")

    def test_errors(self):
        bad = dict(JOB, cluster={"gpu_count": 24}, parallelism={"tp": 3})
        with self.assertRaises(grpc.RpcError) as e:
            self.client.preflight(job_from_dict(bad))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("job.parallelism.tp: 3 does not divide", e.exception.details())
        with self.assertRaises(ValueError):
            job_from_dict(dict(JOB, trainig={}))
        anon = StepcastClient(SERVER)
        with self.assertRaises(grpc.RpcError) as e:
            anon.report_run(job=job_from_dict(JOB), measured_step_time_s=1.0)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        anon.close()

    def test_load_job_yaml(self):
        spec = load_job(os.path.join(ROOT, "examples", "llama3-70b-h100.yaml"))
        self.assertEqual(spec.model.preset, "llama3-70b")
        self.assertEqual(self.client.predict(spec).model_name, "Llama 3 70B")


class LauncherWrapperTest(unittest.TestCase):
    def run_wrapper(self, job, marker):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            import json

            json.dump(job, f)
        cmd = [sys.executable, os.path.join(ROOT, "examples", "launch_with_preflight.py"), "--server", SERVER,
               "--job", f.name, "--", sys.executable, "-c",
               f"import os; open({marker!r}, 'w').write(os.environ.get('STEPCAST_PREDICTION_ID', ''))"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    def test_launches_on_pass(self):
        marker = tempfile.mktemp()
        r = self.run_wrapper(JOB, marker)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(marker) as f:
            self.assertTrue(f.read().startswith("pred-"))

    def test_refuses_on_fail(self):
        marker = tempfile.mktemp()
        r = self.run_wrapper(OOM_JOB, marker)
        self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
        self.assertIn("refusing to launch", r.stderr)
        self.assertFalse(os.path.exists(marker))


if __name__ == "__main__":
    unittest.main()
