"""The installed stepcast-client package (tests/python_package_test.sh installs it into a fresh
virtual environment and starts `stepcast serve`; STEPCAST_SERVER, STEPCAST_TOKEN, STEPCAST_ROOT,
STEPCAST_BIN are set). Each prediction through the package is checked against the CLI's own
prediction of the same job file or command (`stepcast predict --json`), which reads the file
in-process: the client must send exactly the job the CLI builds."""

import json
import os
import subprocess
import tempfile
import unittest
import warnings

import stepcast_client
from stepcast_client import (FAIL, PASS, Prediction, PreflightResult, Run, StepcastClient, StepcastImportWarning,
                             Verdict, job_from_command, job_from_dict, load_job)

SERVER = os.environ["STEPCAST_SERVER"]
TOKEN = os.environ["STEPCAST_TOKEN"]
ROOT = os.environ["STEPCAST_ROOT"]
BIN = os.environ["STEPCAST_BIN"]

JOB_70B = os.path.join(ROOT, "examples", "llama3-70b-h100.yaml")
JOB_HF = os.path.join(ROOT, "examples", "llama3-8b-hf.yaml")
MEGATRON = (
    "torchrun --nproc-per-node 8 --nnodes 8 pretrain_gpt.py --num-layers 80 --hidden-size 8192 "
    "--num-attention-heads 64 --group-query-attention --num-query-groups 8 --ffn-hidden-size 28672 "
    "--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear "
    "--untie-embeddings-and-output-weights --seq-length 8192 --max-position-embeddings 8192 "
    "--micro-batch-size 1 --global-batch-size 128 --tensor-model-parallel-size 4 "
    "--pipeline-model-parallel-size 8 --num-layers-per-virtual-pipeline-stage 2 --sequence-parallel "
    "--use-distributed-optimizer --bf16 --vocab-size 128256 --lr 1.5e-4 --data-path /data/x").split()


def cli_predict(*args):
    """The CLI's prediction (JSON) and its stderr."""
    r = subprocess.run([BIN, "predict", "--json", *args], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"stepcast predict {args}: {r.stderr}")
    return json.loads(r.stdout), r.stderr


class PackageTest(unittest.TestCase):
    def setUp(self):
        self.client = StepcastClient(SERVER, token=TOKEN)

    def tearDown(self):
        self.client.close()

    def test_installed_outside_the_source_tree(self):
        self.assertNotIn(os.path.join(ROOT, "plugin"), stepcast_client.__file__)
        self.assertIn("site-packages", stepcast_client.__file__)

    def test_predict_a_dict_matches_the_cli(self):
        job = {"name": "py-dict", "model": "llama3-8b", "hardware": "h100-sxm", "cluster": {"gpu_count": 8},
               "parallelism": {"tp": 2}, "training": {"seq_length": 8192, "global_batch_size": 64,
                                                        "recompute": "selective", "sharding": "zero1"}}
        p = self.client.predict(job_from_dict(job))
        self.assertIsInstance(p, Prediction)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(job, f)
        want, _ = cli_predict(f.name)
        os.unlink(f.name)
        self.assertAlmostEqual(p.step_time_s, want["step_time_s"], delta=1e-9 * want["step_time_s"])
        self.assertAlmostEqual(p.mfu, want["mfu"], places=12)
        self.assertEqual(p.bottleneck, want["bottleneck"]["kind"].removeprefix("BOTTLENECK_KIND_").lower())
        self.assertAlmostEqual(p.memory_total_bytes, want["memory"]["total_bytes"], delta=1)
        # The breakdown adds up to the step; every term is named with its unit.
        self.assertAlmostEqual(sum(p.breakdown_s.values()), p.step_time_s, delta=1e-9 * p.step_time_s)
        self.assertTrue(all(k.endswith("_s") for k in p.breakdown_s))
        # to_dict is the message; other message fields read through.
        d = p.to_dict()
        self.assertEqual(d["step_time_s"], p.step_time_s)
        self.assertEqual(d["memory"]["fits"], p.fits)
        self.assertEqual([i.name for i in p.memory.items], [i["name"] for i in want["memory"]["items"]])

    def test_preflight_a_file_report_and_list(self):
        r = self.client.preflight(JOB_70B, min_mfu=0.2)  # a path: load_job
        self.assertIsInstance(r, PreflightResult)
        self.assertEqual(r.verdict, PASS)
        self.assertTrue(r.passed)
        self.assertTrue(r.prediction_id.startswith("pred-"))
        want, _ = cli_predict(JOB_70B)
        self.assertAlmostEqual(r.prediction.step_time_s, want["step_time_s"], delta=1e-9 * want["step_time_s"])
        run = self.client.report_run(prediction_id=r.prediction_id,
                                     measured_step_time_s=r.prediction.step_time_s * 1.25, labels={"t": "package"})
        self.assertIsInstance(run, Run)
        self.assertAlmostEqual(run.step_time_error_pct, (1 / 1.25 - 1) * 100, places=6)
        self.assertIn(run.run_id, [x.run_id for x in self.client.list_runs(label="t=package")])
        self.assertEqual(self.client.get_run(run.run_id).labels, {"t": "package"})

        fail = self.client.preflight(load_job(JOB_70B), min_mfu=0.95)
        self.assertEqual(fail.verdict, FAIL)
        self.assertFalse(fail.passed)
        self.assertEqual(fail.verdict.name, "FAIL")
        self.assertEqual([x.rule for x in fail.reasons], ["min_mfu"])
        self.assertEqual(fail.reasons[0].verdict, Verdict.FAIL)
        self.assertAlmostEqual(fail.reasons[0].limit, 0.95)
        self.assertEqual(fail.to_dict()["verdict"], "VERDICT_FAIL")

    def test_hf_config_is_inlined(self):
        spec = load_job(JOB_HF, stepcast=BIN)
        self.assertTrue(spec.model.HasField("shape"))
        with open(os.path.join(ROOT, "examples", "hf", "llama3-8b-config.json")) as f:
            hf = json.load(f)
        self.assertEqual(spec.model.shape.layers, hf["num_hidden_layers"])
        self.assertEqual(spec.model.shape.hidden_size, hf["hidden_size"])
        self.assertEqual(spec.model.shape.kv_heads, hf["num_key_value_heads"])
        self.assertEqual(spec.name, "llama3-8b-hf-fsdp")
        p = self.client.predict(spec)
        want, _ = cli_predict(JOB_HF)
        self.assertAlmostEqual(p.step_time_s, want["step_time_s"], delta=1e-9 * want["step_time_s"])
        # The binary from $STEPCAST_BIN when not passed.
        self.assertEqual(load_job(JOB_HF), spec)

    def test_text_proto_file(self):
        path = os.path.join(ROOT, "examples", "deepseek-v3-gb200.textproto")
        spec = load_job(path)
        want, _ = cli_predict(path)
        p = self.client.predict(spec)
        self.assertEqual(p.job_name, want["job_name"])
        self.assertAlmostEqual(p.step_time_s, want["step_time_s"], delta=1e-9 * want["step_time_s"])

    def test_megatron_command(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            spec = job_from_command(MEGATRON, gpus=64, hardware="h100-sxm")
        self.assertEqual(spec.parallelism.tp, 4)
        self.assertEqual(spec.parallelism.pp, 8)
        self.assertEqual(spec.cluster.gpu_count, 64)
        want, stderr = cli_predict("--gpus", "64", "--hardware", "h100-sxm", "--", *MEGATRON)
        p = self.client.predict(spec)
        self.assertAlmostEqual(p.step_time_s, want["step_time_s"], delta=1e-9 * want["step_time_s"])
        ignored = {l.split("ignored (not modelled):", 1)[1].strip() for l in stderr.splitlines()
                   if "ignored (not modelled):" in l}
        warned = {str(w.message).removeprefix("not modelled: ") for w in caught
                  if issubclass(w.category, StepcastImportWarning)}
        self.assertEqual(warned, {a for a in ignored if a.startswith("--")})
        self.assertIn("--lr 1.5e-4", warned)

    def test_errors_name_the_field(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"model": "llama3-8b", "hardware": "h100-sxm", "trainig": {}}, f)
        with self.assertRaises(ValueError) as e:
            load_job(f.name)
        self.assertIn("trainig: unknown field", str(e.exception))
        with open(f.name, "w") as g:
            json.dump({"model": {"hf_config": "missing/config.json"}, "hardware": "h100-sxm"}, g)
        with self.assertRaises(ValueError) as e:
            load_job(f.name)
        self.assertIn("model.hf_config", str(e.exception))
        os.unlink(f.name)
        with self.assertRaises(ValueError) as e:
            job_from_command(["pretrain_gpt.py", "--hidden-size", "4096"], gpus=8, hardware="h100-sxm")
        self.assertIn("--num-layers", str(e.exception))
        saved = dict(os.environ)
        try:
            os.environ.pop("STEPCAST_BIN")
            os.environ["PATH"] = ""
            with self.assertRaises(FileNotFoundError) as e:
                job_from_command(MEGATRON, gpus=64, hardware="h100-sxm")
            self.assertIn("needs the stepcast binary", str(e.exception))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        with self.assertRaises(TypeError):
            self.client.predict(42)


if __name__ == "__main__":
    unittest.main()
