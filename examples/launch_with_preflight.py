#!/usr/bin/env python3
"""Pre-flight a training job with the stepcast service, then launch it, or refuse.

    examples/launch_with_preflight.py --server 127.0.0.1:50051 --job job.yaml --min-mfu 0.35 \
        -- torchrun --nproc-per-node 8 train.py

Exit codes: the launched command's on PASS/WARN; 4 when the verdict is FAIL (nothing is
launched); 2 on a bad job file. When the service cannot be reached the job is launched anyway
(fail open) with a warning, unless --fail-closed. The command gets STEPCAST_PREDICTION_ID and
STEPCAST_SERVER in its environment, so a run probe can report against the prediction.

PYTHONPATH must hold build/python (generated stubs) and plugin/python (the client).
"""

import argparse
import os
import sys

import grpc

from stepcast_client import FAIL, StepcastClient, load_job, format_interval, format_suggestion, verdict_name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="127.0.0.1:50051")
    ap.add_argument("--job", required=True)
    ap.add_argument("--profile")
    ap.add_argument("--min-mfu", type=float, default=0.0)
    ap.add_argument("--max-memory-fraction", type=float, default=0.0)
    ap.add_argument("--max-cost-per-run", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--fail-closed", action="store_true", help="refuse to launch when the service is down")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the training command after --")
    try:
        job = load_job(args.job)
    except (OSError, ValueError) as e:
        print(f"stepcast: {args.job}: {e}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    try:
        with StepcastClient(args.server, timeout_s=args.timeout) as client:
            resp = client.preflight(job, profile=args.profile, min_mfu=args.min_mfu,
                                    max_memory_fraction=args.max_memory_fraction,
                                    max_cost_per_run_usd=args.max_cost_per_run)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.INVALID_ARGUMENT:
            print(f"stepcast: the job is malformed: {e.details()}", file=sys.stderr)
            return 2
        print(f"stepcast: pre-flight unavailable ({e.code().name}: {e.details()}); "
              f"{'refusing to launch' if args.fail_closed else 'launching without it'}", file=sys.stderr)
        if args.fail_closed:
            return 1
    else:
        p = resp.prediction
        memory = p.memory_verdict.upper().replace("_", " ") if p.memory_verdict else (
            "fits" if p.memory.fits else "DOES NOT FIT")
        print(f"stepcast: {verdict_name(resp.verdict)}: step {p.step_time_s:.3f} s, MFU {100 * p.mfu:.1f}%, "
              f"memory {memory}, prediction {resp.prediction_id}")
        # A limit inside the 80% interval WARNs with both numbers (the reasons say so).
        for r in resp.reasons:
            print(f"  {verdict_name(r.verdict)} {r.rule}: {r.message}")
        if format_interval(p):
            print("stepcast: " + format_interval(p))
        if resp.HasField("suggestion"):
            print("stepcast: " + format_suggestion(resp))
        if resp.verdict == FAIL:
            print("stepcast: refusing to launch", file=sys.stderr)
            return 4
        env["STEPCAST_PREDICTION_ID"] = resp.prediction_id
        env["STEPCAST_SERVER"] = args.server
    sys.stdout.flush()
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    sys.exit(main())
