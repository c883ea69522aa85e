#!/usr/bin/env python3
"""Writes presets/torchtitan_configs/<module>.toml from torchtitan's config registries.

Reads torchtitan/models/<module>/config_registry.py of a pytorch/torchtitan checkout at a given
commit with Python's ast (nothing is imported or run) and writes, for every config function,
the values stepcast reads, in torchtitan's own key names (TrainingConfig, ParallelismConfig,
CompileConfig fields; the model flavor and converters of model_registry(); the activation
checkpoint class). A derived config (`config = base(); config.a.b = v`) starts from its base.

  python3 scripts/extract_torchtitan_configs.py TORCHTITAN_CHECKOUT COMMIT OUT_DIR module...

Values that are not literals are written as strings "<expr: ...>" and listed by the reader as
not modelled; nothing is guessed.
"""
import ast
import sys

CONVERTERS = {
    "Float8LinearConverter": "float8",
    "MXFP8LinearConverter": "mxfp8",
    "NVFP4LinearConverter": "nvfp4",
    "Float8GroupedExpertsConverter": "float8_grouped_experts",
    "MXFP8GroupedExpertsConverter": "mxfp8_grouped_experts",
    "LoRAConverter": "lora",
}
AC = {"FullAC": "full", "SelectiveAC": "selective", "MemoryBudgetAC": "memory_budget"}


def literal(node, env):
    try:
        return ast.literal_eval(node)
    except Exception:
        pass
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add)):
        a, b = literal(node.left, env), literal(node.right, env)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a * b if isinstance(node.op, ast.Mult) else a + b
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in env and \
            isinstance(env[node.value.id], dict):
        return env[node.value.id].get(node.attr)
    return "<expr: %s>" % ast.unparse(node)


def call_name(node):
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "Config" and isinstance(f.value, ast.Name):
        return f.value.id  # FullAC.Config() -> FullAC
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


class Extractor:
    def __init__(self, tree):
        self.funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.cache = {}

    def model(self, call, out, env):
        args = [literal(a, env) for a in call.args]
        if args:
            out["model.flavor"] = args[0]
        for kw in call.keywords:
            if kw.arg == "converters" and isinstance(kw.value, ast.List):
                conv = []
                for c in kw.value.elts:
                    if isinstance(c, ast.Call):
                        name = call_name(c)
                        conv.append(CONVERTERS.get(name, "<expr: %s>" % name))
                        for ckw in c.keywords:
                            if ckw.arg in ("filter_fqns", "fqns"):
                                out["model.converter_%s" % ckw.arg] = literal(ckw.value, env)
                out["model.converters"] = conv
            elif kw.arg in ("attn_backend", "moe_comm_backend", "non_blocking_capacity_factor", "num_mtp_layers",
                            "tp_gemm_backend"):
                out["model.%s" % kw.arg] = literal(kw.value, env)

    def section(self, prefix, call, out, env):
        for kw in call.keywords:
            out["%s.%s" % (prefix, kw.arg)] = literal(kw.value, env)

    def value(self, key, node, out, env):
        """config.<key> = node, or a Trainer.Config keyword."""
        if isinstance(node, ast.Call):
            name = call_name(node)
            if name == "model_registry" and key in ("model_spec",):
                self.model(node, out, env)
                return
            if name == "TrainingConfig":
                self.section("training", node, out, env)
                return
            if name == "ParallelismConfig":
                self.section("parallelism", node, out, env)
                return
            if name == "CompileConfig":
                self.section("compile", node, out, env)
                return
            if name in AC and key == "activation_checkpoint":
                out["activation_checkpoint.mode"] = AC[name]
                return
        if isinstance(node, ast.Constant) and node.value is None and key == "activation_checkpoint":
            out["activation_checkpoint.mode"] = "none"
            return
        if isinstance(node, ast.Name) and node.id in env and isinstance(env[node.id], dict):
            for k, v in env[node.id].items():
                out["%s.%s" % (key, k)] = v
            return
        if key.split(".")[0] in ("training", "parallelism", "compile"):
            out[key] = literal(node, env)

    def run(self, name):
        if name in self.cache:
            return dict(self.cache[name])
        fn = self.funcs[name]
        out, env = {}, {}
        for st in fn.body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1:
                t = st.targets[0]
                if isinstance(t, ast.Name):
                    v = st.value
                    if isinstance(v, ast.Call) and call_name(v) in self.funcs:
                        out.update(self.run(call_name(v)))
                    elif isinstance(v, ast.Call) and call_name(v) == "model_registry":
                        self.model(v, out, env)
                    elif isinstance(v, ast.Call) and call_name(v) == "CompileConfig":
                        d = {}
                        self.section("x", v, d, env)
                        env[t.id] = {k[2:]: val for k, val in d.items()}
                    else:
                        env[t.id] = literal(v, env)
                elif isinstance(t, ast.Attribute):
                    path = ast.unparse(t)
                    if path.startswith("config."):
                        self.value(path[len("config."):], st.value, out, env)
            elif isinstance(st, ast.Return) and isinstance(st.value, ast.Call):
                if call_name(st.value) in self.funcs:
                    out.update(self.run(call_name(st.value)))
                for kw in st.value.keywords:
                    self.value(kw.arg, kw.value, out, env)
        self.cache[name] = dict(out)
        return out


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if v is None:
        return '"None"'
    return '"%s"' % str(v).replace("\\", "\\\\").replace('"', '\\"')


def main():
    root, commit, out_dir = sys.argv[1:4]
    for module in sys.argv[4:]:
        path = "%s/torchtitan/models/%s/config_registry.py" % (root, module)
        tree = ast.parse(open(path).read())
        ex = Extractor(tree)
        lines = [
            "# torchtitan config registry: torchtitan/models/%s/config_registry.py at pytorch/torchtitan" % module,
            "# commit %s, one table per config function (`--module %s --config NAME`)," % (commit, module),
            "# read by scripts/extract_torchtitan_configs.py (ast, nothing run). Keys are torchtitan's",
            "# (TrainingConfig, ParallelismConfig, CompileConfig fields; model.flavor and model.converters",
            "# of model_registry(); activation_checkpoint.mode from FullAC / SelectiveAC / None). A key a",
            "# function does not set keeps torchtitan's default (proto/torchtitan_args.cc).",
        ]
        for name, fn in ex.funcs.items():
            if name.startswith("_") or not isinstance(fn.returns, ast.Attribute) or fn.returns.attr != "Config":
                continue
            values = ex.run(name)
            lines.append("")
            lines.append("[%s]" % name)
            for k in sorted(values):
                lines.append("%s = %s" % (k, toml_value(values[k])))
        open("%s/%s.toml" % (out_dir, module), "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
