"""Python client of the stepcast service, for Python launchers (torchrun wrappers, SkyPilot
admin policies, CI pipelines).

    from stepcast_client import StepcastClient, job_from_dict
    client = StepcastClient("127.0.0.1:50051", token=open("token").read().strip())
    verdict = client.preflight(job_from_dict({...}), min_mfu=0.3)
    if verdict.verdict == FAIL: refuse to launch
    client.report_run(prediction_id=verdict.prediction_id, measured_step_time_s=14.2)

The stubs (stepcast.v1.*_pb2) are generated from proto/stepcast/v1 at build time into
build/python; put that directory and plugin/python on PYTHONPATH.
"""

import os

import grpc
from google.protobuf import json_format

from stepcast.v1 import job_pb2, prediction_pb2, service_pb2, service_pb2_grpc

__all__ = ["StepcastClient", "job_from_dict", "load_job", "PASS", "WARN", "FAIL", "verdict_name"]

PASS = service_pb2.VERDICT_PASS
WARN = service_pb2.VERDICT_WARN
FAIL = service_pb2.VERDICT_FAIL


def verdict_name(v):
    return service_pb2.Verdict.Name(v).replace("VERDICT_", "")


def _normalize(value, descriptor, path):
    """Short enum names ("bf16", "selective") and preset shorthand ("model": "llama3-8b"), as the
    stepcast CLI accepts them, mapped onto the proto's JSON form."""
    if isinstance(value, str) and "preset" in descriptor.fields_by_name:
        return {"preset": value}
    if not isinstance(value, dict):
        raise ValueError(f"{path or '(top level)'}: expected a mapping")
    out = {}
    for key, v in value.items():
        field = descriptor.fields_by_name.get(key) or descriptor.fields_by_camelcase_name.get(key)
        if field is None:
            raise ValueError(f"{path + '.' if path else ''}{key}: unknown field")
        fpath = f"{path + '.' if path else ''}{key}"
        if field.message_type is not None and field.label != field.LABEL_REPEATED:
            v = _normalize(v, field.message_type, fpath)
        elif field.message_type is not None:
            v = [_normalize(x, field.message_type, f"{fpath}[{i}]") for i, x in enumerate(v)]
        elif field.enum_type is not None:
            names = field.enum_type.values_by_name
            zero = field.enum_type.values[0].name
            prefix = zero[: -len("UNSPECIFIED")]
            conv = lambda s: s if s in names else prefix + str(s).upper().replace("-", "_")
            v = [conv(x) for x in v] if isinstance(v, list) else conv(v)
        out[field.name] = v
    return out


def job_from_dict(d):
    """A JobSpec from a dict in the job-file form (docs/JOB_SPEC.md). ValueError names the field."""
    spec = job_pb2.JobSpec()
    try:
        json_format.ParseDict(_normalize(d, spec.DESCRIPTOR, ""), spec)
    except json_format.ParseError as e:
        raise ValueError(str(e)) from None
    return spec


def load_job(path):
    """A JobSpec from a .json or .yaml job file (YAML needs PyYAML)."""
    with open(path) as f:
        text = f.read()
    if path.endswith((".yaml", ".yml")):
        import yaml  # Debian: python3-yaml

        data = yaml.safe_load(text)
    else:
        import json

        data = json.loads(text)
    spec = job_from_dict(data)
    if spec.model.HasField("hf_config"):
        raise ValueError("model.hf_config: the service reads no files; pass model.shape "
                         "(or use `stepcast preflight`, which inlines a local config.json)")
    if not spec.name:
        spec.name = os.path.splitext(os.path.basename(path))[0]
    return spec


class StepcastClient:
    """A connection to `stepcast serve`. Errors are grpc.RpcError with the server's status code
    and message (INVALID_ARGUMENT names the field; UNAUTHENTICATED without the token)."""

    def __init__(self, address="127.0.0.1:50051", token=None, tls_ca=None, timeout_s=10.0):
        self._timeout = timeout_s
        self._metadata = ()
        if tls_ca:
            with open(tls_ca, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            if token:
                creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
            self._channel = grpc.secure_channel(address, creds)
        else:
            self._channel = grpc.insecure_channel(address)
            if token:
                self._metadata = (("authorization", "Bearer " + token),)
        self._stub = service_pb2_grpc.StepcastServiceStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        return method(request, timeout=self._timeout, metadata=self._metadata)

    def predict(self, job, profile=None):
        req = service_pb2.PredictRequest(job=job, profile=service_pb2.ProfileRef(name=profile or ""))
        return self._call(self._stub.Predict, req).prediction

    def preflight(self, job, profile=None, min_mfu=0.0, max_memory_fraction=0.0, max_cost_per_run_usd=0.0,
                  max_cost_per_hour_usd=0.0, max_step_time_s=0.0, warn_on_bottlenecks=(), limits_warn_only=False):
        policy = service_pb2.PreflightPolicy(
            min_mfu=min_mfu, max_memory_fraction=max_memory_fraction, max_cost_per_run_usd=max_cost_per_run_usd,
            max_cost_per_hour_usd=max_cost_per_hour_usd, max_step_time_s=max_step_time_s,
            warn_on_bottlenecks=[prediction_pb2.BottleneckKind.Value("BOTTLENECK_KIND_" + b.upper())
                                 for b in warn_on_bottlenecks],
            limits_warn_only=limits_warn_only)
        req = service_pb2.PreflightRequest(job=job, policy=policy, profile=service_pb2.ProfileRef(name=profile or ""))
        return self._call(self._stub.Preflight, req)

    def report_run(self, measured_step_time_s=0.0, measured_tokens_per_s=0.0, prediction_id="", job=None,
                   labels=None, gpu_count=0, cluster="", start_time=None, end_time=None, measured_breakdown=None):
        req = service_pb2.ReportRunRequest(
            prediction_id=prediction_id, measured_step_time_s=measured_step_time_s,
            measured_tokens_per_s=measured_tokens_per_s, gpu_count=gpu_count, cluster=cluster,
            labels=labels or {})
        if job is not None:
            req.job.CopyFrom(job)
        if start_time is not None:
            req.start_time.FromDatetime(start_time)
        if end_time is not None:
            req.end_time.FromDatetime(end_time)
        if measured_breakdown is not None:
            json_format.ParseDict(measured_breakdown, req.measured_breakdown)
        return self._call(self._stub.ReportRun, req).run

    def get_run(self, run_id):
        return self._call(self._stub.GetRun, service_pb2.GetRunRequest(run_id=run_id)).run

    def list_runs(self, cluster="", model="", label="", page_size=0):
        """All matching runs, newest first (follows the pages)."""
        runs, token = [], ""
        while True:
            resp = self._call(self._stub.ListRuns, service_pb2.ListRunsRequest(
                cluster=cluster, model=model, label=label, page_size=page_size, page_token=token))
            runs.extend(resp.runs)
            token = resp.next_page_token
            if not token:
                return runs
