#!/usr/bin/env python3
"""scripts/extract_launch_recipes.py resolves a name as Python does in the calling recipe's file.

Megatron-Bridge's perf recipes import one library recipe *as* a name the library also gives another
function (perf_recipes/nemotronh/common.py @067f987: `nemotron_3_super_pretrain_16gpu_h100_bf16_config
as nemotron_3_super_pretrain_config`, while recipes/nemotronh/nemotron_3_super.py defines its own
`nemotron_3_super_pretrain_config`). Before 2026-11-29 the extractor took the library's function, so
every Super Blackwell perf recipe read sequence 4096 and a recompute it does not set. And
apply_flex_dispatcher_backend(cfg.model, backend), which many library recipes call, makes the
dispatcher "flex". A tiny tree of the same shape, extracted: the perf recipe must read the aliased
recipe's values, the flex dispatcher included.
"""
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location(
    "extract_launch_recipes", os.path.join(HERE, "..", "scripts", "extract_launch_recipes.py"))
ext = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ext)

FILES = {
    "src/megatron/bridge/recipes/fam/lib.py": '''
from megatron.bridge.training.config import ConfigContainer


def fam_pretrain_config():
    cfg = ConfigContainer()
    cfg.model.seq_length = 4096
    cfg.model.recompute_granularity = "selective"
    return cfg


def fam_pretrain_16gpu_h100_bf16_config():
    cfg = ConfigContainer()
    cfg.model.seq_length = 8192
    cfg.model.moe_token_dispatcher_type = "alltoall"
    cfg.model.moe_flex_dispatcher_backend = "hybridep"
    apply_flex_dispatcher_backend(cfg.model, cfg.model.moe_flex_dispatcher_backend)
    return cfg
''',
    "src/megatron/bridge/perf_recipes/fam/common.py": '''
from megatron.bridge.recipes.fam.lib import fam_pretrain_16gpu_h100_bf16_config as fam_pretrain_config
''',
    "src/megatron/bridge/perf_recipes/fam/gb300.py": '''
from megatron.bridge.perf_recipes.fam.common import fam_pretrain_config


def fam_pretrain_64gpu_gb300_fp8mx_config():
    cfg = fam_pretrain_config()
    cfg.train.global_batch_size = 512
    return cfg
''',
}


def main():
    with tempfile.TemporaryDirectory() as root:
        for rel, text in FILES.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        out = os.path.join(root, "out")
        os.makedirs(out)
        ext.bridge(root, "test", out)
        tables, cur = {}, None
        for line in open(os.path.join(out, "megatron-bridge.toml")):
            line = line.strip()
            if line.startswith("["):
                cur = line[1:-1]
                tables[cur] = {}
            elif cur and " = " in line:
                k, v = line.split(" = ", 1)
                tables[cur][k] = v
        perf = tables.get("fam_pretrain_64gpu_gb300_fp8mx_config")
        failures = []
        if perf is None:
            failures.append("the perf recipe is missing: %s" % sorted(tables))
        else:
            if perf.get("model.seq_length") != "8192":
                failures.append("perf recipe seq_length %s, wanted 8192 (the aliased 16-GPU recipe's)"
                                % perf.get("model.seq_length"))
            if "model.recompute_granularity" in perf:
                failures.append("perf recipe has the other function's recompute: %s" % perf)
            # apply_flex_dispatcher_backend (megatron/bridge/training/flex_dispatcher_backend.py)
            # switches a deepep / hybridep backend's dispatcher to flex.
            if perf.get("model.moe_token_dispatcher_type") != '"flex"':
                failures.append("dispatcher %s, wanted flex (apply_flex_dispatcher_backend)"
                                % perf.get("model.moe_token_dispatcher_type"))
            if perf.get("train.global_batch_size") != "512":
                failures.append("perf recipe global batch %s, wanted 512" % perf.get("train.global_batch_size"))
        lib = tables.get("fam_pretrain_config", {})
        if lib.get("model.seq_length") != "4096":
            failures.append("the library's own fam_pretrain_config read %s, wanted 4096" % lib)
        for f in failures:
            print("FAIL", f)
        print("ok" if not failures else "%d failure(s)" % len(failures))
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
