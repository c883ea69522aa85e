"""Python client of the stepcast service, for Python launchers (torchrun wrappers, SkyPilot
admin policies, CI pipelines).

    from stepcast_client import StepcastClient, load_job, FAIL
    with StepcastClient("127.0.0.1:50051", token=open("token").read().strip()) as client:
        verdict = client.preflight(load_job("job.yaml"), min_mfu=0.3)
        if verdict.verdict == FAIL: refuse to launch
        client.report_run(prediction_id=verdict.prediction_id, measured_step_time_s=14.2)

Units are in the names: *_s seconds, *_bytes bytes, *_usd US dollars, *_per_s per second;
mfu/hfu are fractions in [0, 1].

Results are typed (Prediction, PreflightResult, Run, Reason dataclasses); each keeps the
service's message as `.proto`, has `to_dict()` (the message as a dict, proto field names), and
reads any other field of the message as an attribute (`prediction.memory.items`).

Jobs: job_from_dict (a dict in the job-file form, docs/JOB_SPEC.md), load_job (JSON or YAML file;
a local Hugging Face config.json or a text-proto file is read by the `stepcast` binary) and
job_from_command (a Megatron-LM or torchtitan command line, imported by the `stepcast` binary).
The binary is used rather than a second parser in Python so the client and the CLI turn a file
or a command into exactly the same job; it is found as the `stepcast=` argument, $STEPCAST_BIN,
or `stepcast` on PATH.

The gRPC stubs (stepcast_client._proto) are generated from proto/stepcast/v1 by the CMake build.
"""

import enum
import json
import math
import os
import shutil
import stat
import subprocess
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

try:
    import grpc
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("stepcast_client needs the 'grpcio' package (Debian: apt-get install python3-grpcio; "
                      f"elsewhere: pip install grpcio): {e}") from e
try:
    from google.protobuf import json_format
except ImportError as e:  # pragma: no cover
    raise ImportError("stepcast_client needs the 'protobuf' package (Debian: apt-get install python3-protobuf; "
                      f"elsewhere: pip install protobuf): {e}") from e
try:
    from stepcast_client._proto.stepcast.v1 import job_pb2, prediction_pb2, service_pb2, service_pb2_grpc
except ImportError as e:  # pragma: no cover
    raise ImportError("stepcast_client: cannot import its generated gRPC stubs (stepcast_client._proto): build "
                      "stepcast (scripts/setup.sh) and reinstall the package; with an older 'protobuf' than 4.21 "
                      f"upgrade it: {e}") from e

from stepcast_client._proto.stepcast.v1 import search_pb2  # noqa: E402

__all__ = [
    "StepcastClient", "Prediction", "PreflightResult", "Reason", "Run", "Verdict", "PASS", "WARN", "FAIL",
    "verdict_name", "job_from_dict", "load_job", "job_from_command", "StepcastImportWarning", "format_suggestion",
    "format_interval",
]


class Verdict(enum.IntEnum):
    """A pre-flight verdict (service.proto Verdict): PASS, WARN, or FAIL (do not launch)."""

    UNSPECIFIED = service_pb2.VERDICT_UNSPECIFIED
    PASS = service_pb2.VERDICT_PASS
    WARN = service_pb2.VERDICT_WARN
    FAIL = service_pb2.VERDICT_FAIL


PASS, WARN, FAIL = Verdict.PASS, Verdict.WARN, Verdict.FAIL


def verdict_name(v):
    """"PASS", "WARN" or "FAIL" for a Verdict or the proto's integer; "unknown(N)" for a value
    this client does not know (a newer server), never an exception."""
    try:
        return Verdict(int(v)).name
    except ValueError:
        return f"unknown({int(v)})"


def _verdict(v):
    """The Verdict of a proto value; UNSPECIFIED for a value this client does not know (a newer
    server's): never an exception (the CLI's and the SPANK plugin's rule, reliability review 2 N5)."""
    try:
        return Verdict(int(v))
    except ValueError:
        return Verdict.UNSPECIFIED


def _to_dict(message):
    """A message as a dict with the proto field names, every field printed (protobuf >= 5.26
    renamed the flag)."""
    try:
        return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)
    except TypeError:
        return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                         including_default_value_fields=True)


class _Result:
    """Shared by the result dataclasses: to_dict(), and the message's other fields as attributes."""

    proto: Any

    def to_dict(self) -> Dict[str, Any]:
        """The service's message as a dict (proto field names; numbers in the proto's units)."""
        return _to_dict(self.proto)

    def __getattr__(self, name):
        if name == "proto" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.proto, name)


def _bottleneck_name(kind):
    """"compute", "pipeline_bubble", ...; "unknown(N)" for a kind this client does not know (a
    newer server), never an exception (plugin/policy.h BottleneckKindShortName)."""
    try:
        name = prediction_pb2.BottleneckKind.Name(kind)
    except ValueError:
        return f"unknown({kind})"
    name = name.replace("BOTTLENECK_KIND_", "").lower()
    return name or f"unknown({kind})"


# The prediction's numbers a verdict rests on, as plugin/policy.cc CheckPredictionFinite reads
# them: NaN compares false with every limit, so a NaN step time would pass max_step_time_s.
_FINITE_FIELDS = ("step_time_s", "tokens_per_step", "tokens_per_s", "model_flops_per_step", "peak_flops_per_s_per_gpu",
                  "mfu", "hfu", "memory.total_bytes", "memory.capacity_bytes", "memory.headroom_bytes",
                  "cost.per_hour_usd", "cost.per_step_usd", "cost.per_run_usd", "cost.energy_per_step_j",
                  "cost.energy_per_run_kwh", "cost.steps_per_run", "bottleneck.share")


def _non_finite(prediction):
    """None when the prediction is usable for a verdict, else the CLI's message naming the first
    field that is not ("prediction.step_time_s: is NaN (an input of the job is out of range)")."""
    for path in _FINITE_FIELDS:
        x = prediction
        for part in path.split("."):
            x = getattr(x, part)
        if not math.isfinite(x):
            return f"prediction.{path}: is {'NaN' if math.isnan(x) else 'infinite'} (an input of the job is out of range)"
    if not prediction.step_time_s > 0:
        return "prediction.step_time_s: must be > 0"
    return None


@dataclass(frozen=True)
class Prediction(_Result):
    """What the model predicts for a job (stepcast.v1.Prediction).

    step_time_s: seconds per training step (slowest pipeline stage); tokens_per_s: whole job;
    mfu / hfu: model / hardware FLOPs utilization, fractions of the datasheet peak (PaLM App. B);
    bottleneck: "compute", "memory_bandwidth", "network_intra_node", "network_inter_node" or
    "pipeline_bubble", with its reason; breakdown_s: seconds per step by term (gemm_s, tp_comm_s,
    pipeline_bubble_s, ...; the terms add up to step_time_s); memory_*_bytes: per GPU, most loaded
    stage (bytes, not GiB); fits: whether it fits in the GPU's memory; costs in US dollars.

    How far predictions like this one have been off (docs/VALIDATION.md "Intervals"):
    step_time_low_s / step_time_high_s, the 80% interval (0 when the server sends none);
    interval_validated: False outside the validated region (the out-of-region interval); interval_notes:
    sentences (outside the validated region, below the minimum of runs, low-confidence values);
    memory_verdict: "fits", "tight" (the capacity lies inside the memory interval) or
    "does_not_fit" ("" from an older server).
    """

    job_name: str
    model_name: str
    hardware_name: str
    gpu_count: int
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    hfu: float
    bottleneck: str
    bottleneck_reason: str
    breakdown_s: Dict[str, float]
    memory_total_bytes: float
    memory_capacity_bytes: float
    fits: bool
    cost_per_hour_usd: float
    cost_per_run_usd: float
    time_to_train_s: float
    warnings: List[str]
    step_time_low_s: float
    step_time_high_s: float
    interval_validated: bool
    interval_notes: List[str]
    memory_verdict: str
    proto: prediction_pb2.Prediction = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, p):
        return cls(
            job_name=p.job_name, model_name=p.model_name, hardware_name=p.hardware_name, gpu_count=p.gpu_count,
            step_time_s=p.step_time_s, tokens_per_s=p.tokens_per_s, tokens_per_s_per_gpu=p.tokens_per_s_per_gpu,
            mfu=p.mfu, hfu=p.hfu, bottleneck=_bottleneck_name(p.bottleneck.kind),
            bottleneck_reason=p.bottleneck.reason,
            breakdown_s={f.name: getattr(p.breakdown, f.name) for f in p.breakdown.DESCRIPTOR.fields},
            memory_total_bytes=p.memory.total_bytes, memory_capacity_bytes=p.memory.capacity_bytes,
            fits=p.memory.fits, cost_per_hour_usd=p.cost.per_hour_usd, cost_per_run_usd=p.cost.per_run_usd,
            time_to_train_s=p.cost.time_to_train_s, warnings=list(p.warnings),
            step_time_low_s=p.step_time_interval.low_s, step_time_high_s=p.step_time_interval.high_s,
            interval_validated=p.step_time_interval.validated, interval_notes=list(p.step_time_interval.notes),
            memory_verdict=_memory_verdict_name(p.memory_interval.verdict), proto=p)


def _memory_verdict_name(v):
    name = prediction_pb2.MemoryVerdict.Name(v).replace("MEMORY_VERDICT_", "").lower()
    return "" if name == "unspecified" else name


def format_interval(prediction):
    """A prediction's 80% step-time interval, where it comes from, its notes and the memory verdict
    as printable lines ("" when the server sent no interval). `prediction`: a Prediction or a
    stepcast.v1.Prediction."""
    p = getattr(prediction, "proto", prediction)
    if not p.HasField("step_time_interval"):
        return ""
    i = p.step_time_interval
    lines = [f"step {p.step_time_s:.4g} s, {i.summary}"]
    lines += [f"  note: {n}" for n in i.notes]
    if p.memory_interval.available:
        lines.append(f"  memory: {p.memory_interval.summary}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Reason(_Result):
    """One pre-flight rule that triggered: rule ("memory_fit", "min_mfu", "max_step_time_s", ...),
    its verdict, a sentence, and the value against the limit (in the rule's unit: a fraction for
    min_mfu / max_memory_fraction, seconds, US dollars)."""

    rule: str
    verdict: Verdict
    message: str
    value: float
    limit: float
    proto: service_pb2.PreflightReason = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, r):
        return cls(rule=r.rule, verdict=_verdict(r.verdict), message=r.message, value=r.value, limit=r.limit,
                   proto=r)


@dataclass(frozen=True)
class PreflightResult(_Result):
    """The service's verdict on a job (stepcast.v1.PreflightResponse): `verdict`, the `reasons`
    that triggered, the `prediction`, and the `prediction_id` to pass to report_run after the
    run. `passed` is False only for FAIL (WARN launches). A prediction that is not finite (a NaN
    step time: an older or foreign server's PASS) is FAIL here, with a "non_finite" reason, as the
    CLI and the SPANK plugin overrule it; a verdict this client does not know is UNSPECIFIED."""

    verdict: Verdict
    reasons: List[Reason]
    prediction: Prediction
    prediction_id: str
    proto: service_pb2.PreflightResponse = field(repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return self.verdict != Verdict.FAIL

    @classmethod
    def from_proto(cls, r):
        problem = _non_finite(r.prediction)
        if problem is not None:
            r = service_pb2.PreflightResponse.FromString(r.SerializeToString())
            r.verdict = service_pb2.VERDICT_FAIL
            r.reasons.add(rule="non_finite", verdict=service_pb2.VERDICT_FAIL, message=problem)
        return cls(verdict=_verdict(r.verdict), reasons=[Reason.from_proto(x) for x in r.reasons],
                   prediction=Prediction.from_proto(r.prediction), prediction_id=r.prediction_id, proto=r)


@dataclass(frozen=True)
class Run(_Result):
    """A measured run stored with its prediction (stepcast.v1.Run): step times in seconds, MFU as
    fractions, step_time_error_pct = (predicted - measured) / measured x 100, and the category
    that explains most of the difference when a measured breakdown was reported."""

    run_id: str
    prediction_id: str
    cluster: str
    model: str
    hardware: str
    gpu_count: int
    predicted_step_time_s: float
    measured_step_time_s: float
    predicted_mfu: float
    measured_mfu: float
    step_time_error_pct: float
    largest_difference: str
    labels: Dict[str, str]
    proto: service_pb2.Run = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, r):
        return cls(run_id=r.run_id, prediction_id=r.prediction_id, cluster=r.cluster, model=r.model,
                   hardware=r.hardware, gpu_count=r.gpu_count, predicted_step_time_s=r.predicted_step_time_s,
                   measured_step_time_s=r.measured_step_time_s, predicted_mfu=r.predicted_mfu,
                   measured_mfu=r.measured_mfu, step_time_error_pct=r.step_time_error_pct,
                   largest_difference=r.largest_difference, labels=dict(r.labels), proto=r)


# ---- jobs ----

class StepcastImportWarning(UserWarning):
    """A training-command argument the model does not read (reported by `stepcast import`)."""


def format_suggestion(resp):
    """A PreflightResponse's layout suggestion as printable lines ("" when it has none): why, the
    layout and its predicted step time, and each job field (and Megatron-LM flag) to change.
    `resp`: a PreflightResult or a stepcast.v1.PreflightResponse."""
    resp = getattr(resp, "proto", resp)
    if not resp.HasField("suggestion"):
        return ""
    s = resp.suggestion
    kind = "does not fit" if s.reason == "does_not_fit" else "slower"
    lines = [f"suggestion ({kind}): {s.message}",
             f"  suggested: {s.suggested.layout.summary}, step {s.suggested_step_time_s:.4g} s "
             f"(submitted {s.submitted_step_time_s:.4g} s)" + (" [search cut short]" if s.partial else "")]
    for c in s.suggested.changes:
        flag = f"   (Megatron: {c.megatron_flag})" if c.megatron_flag else ""
        lines.append(f"  {c.field}: {c.before} -> {c.after}{flag}")
    return "\n".join(lines)


# The CLI's bounds on a job file (proto/codec.h): its size, and its size with every YAML alias
# expanded (the "billion laughs" bomb: 27 KB of aliases built a 180 MB JobSpec in 60 s and
# 3.6 GB, reliability review 2 N5).
MAX_JOB_FILE_BYTES = 16 << 20
MAX_EXPANDED_JOB_BYTES = 16 << 20
# gRPC's default message limit: a larger request fails with a bare "larger than max".
_MAX_REQUEST_BYTES = 4 << 20


def _read_job_file(path):
    """The text of a job file, as the CLI reads one (proto/codec.h ReadInputFile): only a regular
    file (a FIFO blocked and /dev/zero read until MemoryError), at most MAX_JOB_FILE_BYTES, UTF-8.
    ValueError naming the file; FileNotFoundError when it is missing."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket")
            raise ValueError(f"{path}: not a regular file ({kind}); give a job file")
        if st.st_size > MAX_JOB_FILE_BYTES:
            raise ValueError(f"{path}: {st.st_size} bytes, above the limit of {MAX_JOB_FILE_BYTES} bytes for a job file")
        chunks, n = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            n += len(chunk)
            if n > MAX_JOB_FILE_BYTES:
                raise ValueError(f"{path}: above the limit of {MAX_JOB_FILE_BYTES} bytes for a job file")
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start} is {data[e.start]:#04x}); save the job file as "
                         "UTF-8") from None


def _expanded_bytes(doc, limit):
    """The size of a parsed document with every shared part (a YAML alias) counted each time it
    appears, as JSON would spell it out, saturating just above `limit`; iterative (no recursion)
    and linear in the document's distinct parts. ValueError for a part that contains itself."""
    def scalar(x):
        return len(x) + 2 if isinstance(x, str) else 8

    memo, open_ = {}, set()
    stack = [(doc, False)]
    while stack:
        obj, closing = stack.pop()
        if not isinstance(obj, (dict, list)):
            continue
        key = id(obj)
        children = list(obj.values()) if isinstance(obj, dict) else obj
        if closing:
            open_.discard(key)
            total = 2 + (sum(scalar(k) + 1 for k in obj) if isinstance(obj, dict) else 0)
            for c in children:
                total += memo[id(c)] if isinstance(c, (dict, list)) else scalar(c)
                total += 1
                if total > limit:
                    break
            memo[key] = min(total, limit + 1)
            continue
        if key in memo:
            continue
        if key in open_:
            raise ValueError("the document contains itself (a recursive YAML alias)")
        open_.add(key)
        stack.append((obj, True))
        for c in children:
            if isinstance(c, (dict, list)) and id(c) not in memo:
                stack.append((c, False))
    return memo[id(doc)] if isinstance(doc, (dict, list)) else scalar(doc)


def _check_number(v, path):
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{path}: {v} is not a finite number")
    return v


def _normalize(value, descriptor, path, depth=0):
    """Short enum names ("bf16", "selective") and preset shorthand ("model": "llama3-8b"), as the
    stepcast CLI accepts them, mapped onto the proto's JSON form. NaN and infinities are refused
    naming the field, as the CLI refuses them."""
    if depth > 32:
        raise ValueError(f"{path}: nested too deeply")
    if isinstance(value, str) and "preset" in descriptor.fields_by_name:
        return {"preset": value}
    if not isinstance(value, dict):
        raise ValueError(f"{path or '(top level)'}: expected a mapping")
    out = {}
    for key, v in value.items():
        field_ = descriptor.fields_by_name.get(key) or descriptor.fields_by_camelcase_name.get(key)
        if field_ is None:
            raise ValueError(f"{path + '.' if path else ''}{key}: unknown field")
        fpath = f"{path + '.' if path else ''}{key}"
        if field_.message_type is not None and field_.message_type.GetOptions().map_entry:
            if not isinstance(v, dict):
                raise ValueError(f"{fpath}: expected a mapping of keys to values")
            v = {k: _check_number(x, f"{fpath}[{k}]") for k, x in v.items()}
        elif field_.message_type is not None and field_.label != field_.LABEL_REPEATED:
            v = _normalize(v, field_.message_type, fpath, depth + 1)
        elif field_.message_type is not None:
            if not isinstance(v, list):
                raise ValueError(f"{fpath}: expected a list")
            v = [_normalize(x, field_.message_type, f"{fpath}[{i}]", depth + 1) for i, x in enumerate(v)]
        elif field_.enum_type is not None:
            names = field_.enum_type.values_by_name
            zero = field_.enum_type.values[0].name
            prefix = zero[: -len("UNSPECIFIED")]

            def conv(s, names=names, prefix=prefix):
                return s if s in names else prefix + str(s).upper().replace("-", "_")

            v = [conv(x) for x in v] if isinstance(v, list) else conv(v)
        elif isinstance(v, list):
            v = [_check_number(x, f"{fpath}[{i}]") for i, x in enumerate(v)]
        else:
            v = _check_number(v, fpath)
        out[field_.name] = v
    return out


def job_from_dict(d: Dict[str, Any]) -> job_pb2.JobSpec:
    """A JobSpec from a dict in the job-file form (docs/JOB_SPEC.md): presets by name, short enum
    names. ValueError names the field. A model.hf_config path is left as is: use load_job, which
    inlines it, since the service reads no files."""
    spec = job_pb2.JobSpec()
    try:
        json_format.ParseDict(_normalize(d, spec.DESCRIPTOR, ""), spec)
    except json_format.ParseError as e:
        raise ValueError(str(e)) from None
    except RecursionError:
        raise ValueError("the job is nested too deeply") from None
    return spec


def _stepcast_binary(stepcast: Optional[str], what: str) -> str:
    path = stepcast or os.environ.get("STEPCAST_BIN") or shutil.which("stepcast")
    if not path:
        raise FileNotFoundError(
            f"stepcast_client: {what} needs the stepcast binary (the same importer as the CLI): pass "
            "stepcast='build/bin/stepcast', set STEPCAST_BIN, or put build/bin on PATH")
    return path


def _stepcast_import(args: Sequence[str], stepcast: Optional[str], what: str) -> job_pb2.JobSpec:
    """Runs `stepcast import ARGS` (prints the JobSpec as JSON) and parses it. ValueError with the
    binary's message when the input is invalid (exit 2), RuntimeError otherwise."""
    binary = _stepcast_binary(stepcast, what)
    r = subprocess.run([binary, "import", *args], capture_output=True, text=True, timeout=60)
    message = r.stderr.strip().replace("stepcast: ", "")
    if r.returncode == 2:
        raise ValueError(message)
    if r.returncode != 0:
        raise RuntimeError(f"{binary} import exited {r.returncode}: {message}")
    for line in r.stderr.splitlines():
        if "ignored (not modelled):" in line:
            arg = line.split("ignored (not modelled):", 1)[1].strip()
            if arg.startswith("--"):
                warnings.warn(f"not modelled: {arg}", StepcastImportWarning, stacklevel=3)
    spec = job_pb2.JobSpec()
    json_format.Parse(r.stdout, spec)
    return spec


def load_job(path: Union[str, os.PathLike], stepcast: Optional[str] = None) -> job_pb2.JobSpec:
    """A JobSpec from a job file, ready to send: .json, or .yaml/.yml (needs PyYAML: Debian
    python3-yaml) read in Python; a text proto (.textproto, .txtpb, .pbtxt) or a job whose
    model.hf_config names a local Hugging Face config.json is read by `stepcast import`, which
    inlines the config as model.shape (relative paths from the job file's directory), exactly as
    `stepcast preflight` does. The job's name defaults to the file's stem. ValueError names the
    file and field; FileNotFoundError when the file (or a needed stepcast binary) is missing.
    The CLI's checks apply: only a regular file (not a FIFO or a device) of at most
    MAX_JOB_FILE_BYTES, UTF-8, expanding to at most MAX_EXPANDED_JOB_BYTES with its YAML aliases,
    no NaN or infinity (ValueError for each, naming the file)."""
    path = os.fspath(path)
    text = _read_job_file(path)  # a FIFO or a device is refused here, whatever its name
    if not path.endswith((".yaml", ".yml", ".json")):
        return _stepcast_import([path], stepcast, f"{path} (a text-proto job file)")
    try:
        if path.endswith(".json"):
            def constant(name):
                raise ValueError(f"{name} is not a finite number")

            data = json.loads(text, parse_constant=constant)
        else:
            try:
                import yaml  # Debian: python3-yaml
            except ImportError as e:
                raise ImportError("stepcast_client.load_job: YAML job files need the 'PyYAML' package "
                                  "(Debian: python3-yaml); JSON files need nothing") from e
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as e:
                raise ValueError(f"not valid YAML: {e}") from None
        if _expanded_bytes(data, MAX_EXPANDED_JOB_BYTES) > MAX_EXPANDED_JOB_BYTES:
            raise ValueError(f"the document expands to more than {MAX_EXPANDED_JOB_BYTES} bytes (YAML aliases?); "
                             "refusing it")
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply") from None
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    try:
        spec = job_from_dict(data)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    if spec.model.HasField("hf_config"):
        spec = _stepcast_import([path], stepcast, f"{path}: model.hf_config (a Hugging Face config.json)")
    if not spec.name:
        spec.name = os.path.splitext(os.path.basename(path))[0]
    return spec


def job_from_command(command: Sequence[str], gpus: int, hardware: str, gpus_per_node: int = 0,
                     stepcast: Optional[str] = None) -> job_pb2.JobSpec:
    """A JobSpec from a Megatron-LM or torchtitan training command (argv list; launcher words such
    as torchrun and its flags are skipped), on `gpus` GPUs of the `hardware` preset
    (gpus_per_node 0: the preset's), imported by `stepcast import` exactly as
    `stepcast predict -- COMMAND` does (proto/launch_args.h lists the flags read). Arguments the
    model does not read are reported as StepcastImportWarning. ValueError names the flag."""
    def whole(name, v):
        if isinstance(v, bool) or not isinstance(v, int):
            try:
                if isinstance(v, bool) or float(v) != int(v):
                    raise ValueError
                v = int(v)
            except (TypeError, ValueError, OverflowError):
                raise ValueError(f"{name}: {v!r} is not a whole number") from None
        return v

    args = ["--gpus", str(whole("gpus", gpus)), "--hardware", hardware]
    if gpus_per_node:
        args += ["--gpus-per-node", str(whole("gpus_per_node", gpus_per_node))]
    return _stepcast_import([*args, "--", *command], stepcast, "importing a training command")


def _enum_value(enum_type, prefix, name, what):
    """The value of a short enum name ("network_inter_node"); ValueError naming `what` and the
    names it takes otherwise."""
    try:
        return enum_type.Value(prefix + str(name).upper())
    except ValueError:
        known = ", ".join(n[len(prefix):].lower() for n in enum_type.keys() if not n.endswith("UNSPECIFIED"))
        raise ValueError(f"{what}: unknown value {name!r}; one of {known}") from None


def _as_job(job) -> job_pb2.JobSpec:
    if isinstance(job, job_pb2.JobSpec):
        return job
    if isinstance(job, dict):
        return job_from_dict(job)
    if isinstance(job, (str, os.PathLike)):
        return load_job(job)
    raise TypeError(f"job: expected a JobSpec, a dict or a job file path, not {type(job).__name__}")


# ---- the client ----

class StepcastClient:
    """A connection to `stepcast serve` (address "host:port"; token: the bearer token that
    report_run needs; tls_ca: PEM roots, to use TLS; timeout_s: per-call deadline in seconds).
    Jobs may be JobSpecs, dicts (job_from_dict) or job file paths (load_job). Errors are
    grpc.RpcError with the server's status code and message (INVALID_ARGUMENT names the field;
    UNAUTHENTICATED without the token; FAILED_PRECONDITION for an unknown profile)."""

    def __init__(self, address: str = "127.0.0.1:50051", token: Optional[str] = None,
                 tls_ca: Optional[str] = None, timeout_s: float = 10.0):
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
        n = request.ByteSize()
        if n > _MAX_REQUEST_BYTES:
            raise ValueError(f"request: {n} bytes, above gRPC's message limit of {_MAX_REQUEST_BYTES} bytes (the "
                             "service takes jobs of at most 256 KiB)")
        return method(request, timeout=self._timeout, metadata=self._metadata)

    def predict(self, job, profile: Optional[str] = None) -> Prediction:
        """The prediction for a job, on the named calibration profile (default: the hardware's
        reference profile)."""
        req = service_pb2.PredictRequest(job=_as_job(job), profile=service_pb2.ProfileRef(name=profile or ""))
        return Prediction.from_proto(self._call(self._stub.Predict, req).prediction)

    def preflight(self, job, profile: Optional[str] = None, min_mfu: float = 0.0, max_memory_fraction: float = 0.0,
                  max_cost_per_run_usd: float = 0.0, max_cost_per_hour_usd: float = 0.0,
                  max_step_time_s: float = 0.0, warn_on_bottlenecks: Sequence[str] = (),
                  limits_warn_only: bool = False) -> PreflightResult:
        """The verdict on a job before launching it. Limits (0 = off): min_mfu and
        max_memory_fraction as fractions in (0, 1], costs in US dollars, max_step_time_s in
        seconds. warn_on_bottlenecks: bottleneck names that WARN ("network_inter_node", ...).
        limits_warn_only: breached limits WARN instead of FAIL. A job that does not fit in memory
        always FAILs."""
        policy = service_pb2.PreflightPolicy(
            min_mfu=min_mfu, max_memory_fraction=max_memory_fraction, max_cost_per_run_usd=max_cost_per_run_usd,
            max_cost_per_hour_usd=max_cost_per_hour_usd, max_step_time_s=max_step_time_s,
            warn_on_bottlenecks=[_enum_value(prediction_pb2.BottleneckKind, "BOTTLENECK_KIND_", b,
                                             "warn_on_bottlenecks") for b in warn_on_bottlenecks],
            limits_warn_only=limits_warn_only)
        req = service_pb2.PreflightRequest(job=_as_job(job), policy=policy,
                                           profile=service_pb2.ProfileRef(name=profile or ""))
        return PreflightResult.from_proto(self._call(self._stub.Preflight, req))

    def search(self, job, objective="step_time", top_n=10, min_gpus=0, max_gpus=0, time_limit_s=0.0, profile=None,
               budget_usd=0.0):
        """The best layouts of `job` (a stepcast.v1.SearchResult): objective one of step_time,
        tokens_per_s_per_gpu, cost_per_token, mfu, time_to_train; GPU counts min_gpus..max_gpus (whole
        nodes; both 0: the job's). Past the call's timeout or time_limit_s: the best found so far,
        marked partial."""
        options = search_pb2.SearchOptions(
            objective=_enum_value(search_pb2.SearchObjective, "SEARCH_OBJECTIVE_", objective, "objective"), top_n=top_n,
            budget_usd=budget_usd, time_limit_s=time_limit_s,
            space=search_pb2.SearchSpaceSpec(min_gpus=min_gpus, max_gpus=max_gpus))
        req = service_pb2.SearchRequest(job=_as_job(job), options=options, profile=service_pb2.ProfileRef(name=profile or ""))
        return self._call(self._stub.Search, req).result

    def report_run(self, measured_step_time_s: float = 0.0, measured_tokens_per_s: float = 0.0,
                   prediction_id: str = "", job=None, labels: Optional[Dict[str, str]] = None, gpu_count: int = 0,
                   cluster: str = "", start_time=None, end_time=None,
                   measured_breakdown: Optional[Dict[str, float]] = None,
                   log: Optional[Union[str, os.PathLike]] = None, stepcast: Optional[str] = None) -> Run:
        """Stores what a run measured against its prediction (prediction_id from preflight, or the
        job, predicted now). measured_step_time_s in seconds or measured_tokens_per_s for the
        whole job; start_time/end_time: datetimes; measured_breakdown: StepBreakdown fields in
        seconds ({"gemm_s": ..., "exposed_communication_s": ...}). Needs the token.
        log: the run's training log instead of the two measurements (Megatron-LM/-Bridge, NeMo,
        torchtitan; a torchtitan log needs gpu_count), read by the stepcast binary exactly as
        `stepcast report --log` reads it (`stepcast report --log FILE --dry-run [--job JOB]`;
        binary from `stepcast`, STEPCAST_BIN or PATH): its median step time after the warm-up
        record, and the framework's own TFLOP/s, MFU and tokens/s as the run's
        framework_reported; with a job, also their conversion under the framework's FLOP
        convention (framework_reported.flop_convention, converted_step_time_s, converted_mfu).
        Logs of Megatron-LM/-Bridge, NeMo, torchtitan, llm-foundry (Composer console) and the HF
        Trainer are read. ValueError with the binary's message (file, line, field) for a bad log."""
        log_req = None
        if log is not None:
            if measured_step_time_s or measured_tokens_per_s:
                raise ValueError("log: give log or measured_step_time_s/measured_tokens_per_s, not both")
            binary = _stepcast_binary(stepcast, "report_run(log=...)")
            args = [binary, "report", "--dry-run", "--log", os.fspath(log)]
            if gpu_count:
                args += ["--gpus", str(gpu_count)]
            with tempfile.TemporaryDirectory() as tmp:
                if job is not None:
                    # The job lets the binary convert the log's own TFLOP/s or MFU under the
                    # framework's FLOP convention (framework_reported.converted_step_time_s).
                    job_path = os.path.join(tmp, "job.json")
                    with open(job_path, "w") as f:
                        f.write(json_format.MessageToJson(_as_job(job), preserving_proto_field_name=True))
                    args += ["--job", job_path]
                r = subprocess.run(args, capture_output=True, text=True, timeout=60)
            message = r.stderr.strip().replace("stepcast: ", "")
            if r.returncode == 2:
                raise ValueError(message)
            if r.returncode != 0:
                raise RuntimeError(f"{binary} report --dry-run exited {r.returncode}: {message}")
            log_req = json_format.Parse(r.stdout, service_pb2.ReportRunRequest())
            measured_step_time_s = log_req.measured_step_time_s
            measured_tokens_per_s = log_req.measured_tokens_per_s
            labels = {**dict(log_req.labels), **(labels or {})}
        req = service_pb2.ReportRunRequest(
            prediction_id=prediction_id, measured_step_time_s=measured_step_time_s,
            measured_tokens_per_s=measured_tokens_per_s, gpu_count=gpu_count, cluster=cluster,
            labels=labels or {})
        if log_req is not None:
            req.framework_reported.CopyFrom(log_req.framework_reported)
        if job is not None:
            req.job.CopyFrom(_as_job(job))
        if start_time is not None:
            req.start_time.FromDatetime(start_time)
        if end_time is not None:
            req.end_time.FromDatetime(end_time)
        if measured_breakdown is not None:
            json_format.ParseDict(measured_breakdown, req.measured_breakdown)
        return Run.from_proto(self._call(self._stub.ReportRun, req).run)

    def get_run(self, run_id: str) -> Run:
        """One stored run by id ("run-...")."""
        return Run.from_proto(self._call(self._stub.GetRun, service_pb2.GetRunRequest(run_id=run_id)).run)

    def list_runs(self, cluster: str = "", model: str = "", label: str = "", page_size: int = 0) -> List[Run]:
        """All matching runs, newest first (follows the pages); label as "key=value"."""
        runs, token = [], ""
        while True:
            resp = self._call(self._stub.ListRuns, service_pb2.ListRunsRequest(
                cluster=cluster, model=model, label=label, page_size=page_size, page_token=token))
            runs.extend(Run.from_proto(r) for r in resp.runs)
            token = resp.next_page_token
            if not token:
                return runs
