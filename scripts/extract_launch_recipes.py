#!/usr/bin/env python3
"""Writes presets/launchers/megatron-bridge.toml and nemo.toml from the frameworks' recipe files.

Megatron-Bridge: every `*_pretrain_*config` function of src/megatron/bridge/recipes/ and
src/megatron/bridge/perf_recipes/ (the benchmark recipes win where both define a name, as
scripts/training/recipe_metadata.py BENCHMARK_RECIPE_PRECEDENCE_COLLISIONS says), evaluated with a
small symbolic interpreter over Python's ast (nothing is imported or run): `cfg.a.b = value`
assignments, helpers applied to cfg (inlined with their arguments), `cfg = other_recipe()`,
ConfigContainer(...) keywords, `cfg.model = AutoBridge.from_hf_pretrained("ID")`. Values that are
not literals are kept as "<expr: ...>" text.

NeMo 2: nemo/collections/llm/recipes/<name>.py: the defaults of trainer()'s parallelism
arguments, the trainer(...) call in pretrain_recipe(), the MockDataModule(...) keywords, and
model()'s config class.

  python3 scripts/extract_launch_recipes.py BRIDGE_CHECKOUT BRIDGE_COMMIT NEMO_CHECKOUT NEMO_COMMIT OUT_DIR
"""
import ast
import os
import re
import sys

PRETRAIN = re.compile(r"_pretrain(_[a-z0-9_]+)?_config$")


class Ref:
    """A reference to part of the config being built (cfg -> "", cfg.model -> "model.")."""

    def __init__(self, prefix):
        self.prefix = prefix


class Unknown(str):
    pass


class Returned:
    """A `return` statement was executed (its value, possibly None)."""

    def __init__(self, value):
        self.value = value


def expr_text(node):
    return Unknown("<expr: %s>" % ast.unparse(node))


class Interp:
    def __init__(self):
        self.funcs = {}      # name -> list of (package, module path, FunctionDef, module constants)
        self.aliases = {}    # alias -> (package, name, file that defines the alias)
        self.constants = {}  # module-level literal constants of every file (imported ones resolve here)
        self.depth = 0
        # Per file: the functions it defines and the names it imports (local name -> (module,
        # name)), so that a name resolves as Python resolves it in the calling function's file
        # (perf_recipes/nemotronh/common.py imports the library's 16-GPU H100 Super recipe *as*
        # nemotron_3_super_pretrain_config, a name the library also defines for another recipe).
        self.file_funcs = {}    # path -> {name: (package, path, FunctionDef, consts)}
        self.file_imports = {}  # path -> {local name: (module, name)}
        self.module_files = {}  # "megatron.bridge.x.y" -> path
        self.file_stack = []    # the files of the functions being evaluated

    def load(self, path, package):
        tree = ast.parse(open(path).read())
        norm = path.replace(os.sep, "/")
        if "/src/" in norm:
            mod = norm.split("/src/", 1)[1][:-3].replace("/", ".")
            self.module_files[mod[:-len(".__init__")] if mod.endswith(".__init__") else mod] = path
        imports = self.file_imports.setdefault(path, {})
        own = self.file_funcs.setdefault(path, {})
        consts = {}
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None
            if isinstance(target, ast.Name):
                try:
                    consts[target.id] = ast.literal_eval(node.value)
                    self.constants.setdefault(target.id, consts[target.id])
                except Exception:
                    pass
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                self.funcs.setdefault(node.name, []).append((package, path, node, consts))
                own[node.name] = (package, path, node, consts)
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if node.level:
                    base = norm.split("/src/", 1)[1].split("/")[:-node.level] if "/src/" in norm else []
                    module = ".".join(base + [node.module])
                for a in node.names:
                    imports[a.asname or a.name] = (module, a.name)
            # `from megatron.bridge.recipes.x import a as b`: b names a (legacy recipe names are
            # kept this way, e.g. recipes/deepseek/deepseek_v3.py deepseek_v3_pretrain_config).
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("megatron.bridge"):
                pkg = "perf" if ".perf_recipes" in node.module else "library"
                for a in node.names:
                    if a.asname and a.asname != a.name:
                        self.aliases[a.asname] = (pkg, a.name, path)

    def resolve_in_file(self, path, name, depth=0):
        """The function `name` means in file `path`: its own, or the one it imports under that name."""
        if depth > 10:
            return None
        if name in self.file_funcs.get(path, {}):
            return self.file_funcs[path][name]
        imp = self.file_imports.get(path, {}).get(name)
        if imp is None:
            return None
        target = self.module_files.get(imp[0])
        return self.resolve_in_file(target, imp[1], depth + 1) if target else None

    def find(self, name, package):
        if self.file_stack:
            r = self.resolve_in_file(self.file_stack[-1], name)
            if r is not None:
                return r
        if name not in self.funcs and name in self.aliases:
            package, name = self.aliases[name][0], self.aliases[name][1]
        cands = self.funcs.get(name, [])
        for c in cands:
            if c[0] == package:
                return c
        return cands[0] if cands else None

    # ---- evaluation
    def value(self, node, env, cfg, package):
        try:
            return ast.literal_eval(node)
        except Exception:
            pass
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.constants:
                return self.constants[node.id]
            return expr_text(node)
        if isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name) and base.id == "torch":
                return "torch.%s" % node.attr
            ref = self.ref_of(node, env)
            if ref is not None:
                key = ref.rstrip(".")
                if key in cfg:
                    return cfg[key]
                return Ref(ref + ".") if any(k.startswith(key + ".") for k in cfg) else expr_text(node)
            return expr_text(node)
        if isinstance(node, ast.BinOp):
            a, b = self.value(node.left, env, cfg, package), self.value(node.right, env, cfg, package)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
                ops = {ast.Mult: lambda x, y: x * y, ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y,
                       ast.FloorDiv: lambda x, y: x // y}
                if type(node.op) in ops:
                    return ops[type(node.op)](a, b)
            return expr_text(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            vals = [self.value(e, env, cfg, package) for e in node.elts]
            return vals
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name == "float" or name == "int":
                v = self.value(node.args[0], env, cfg, package) if node.args else 0
                try:
                    return float(v) if name == "float" else int(v)
                except Exception:
                    return expr_text(node)
            if name and self.find(name, package):
                r = self.call(name, node, env, cfg, package)
                return r if r is not None else expr_text(node)
            # An outside function (get_mixed_precision_config('fp8_cs')): its text with the
            # arguments that are known replaced by their values.
            args = []
            for a in node.args:
                v = self.value(a, env, cfg, package)
                args.append(repr(v) if isinstance(v, (int, float, str)) and not isinstance(v, Unknown) else ast.unparse(a))
            return Unknown("<expr: %s(%s)>" % (ast.unparse(node.func), ", ".join(args)))
        return expr_text(node)

    def ref_of(self, node, env):
        """cfg.model.x -> "model.x" (the dotted key), for an attribute chain rooted at a Ref."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and isinstance(env.get(node.id), Ref):
            return env[node.id].prefix + ".".join(reversed(parts))
        return None

    def assign_container(self, prefix, call, env, cfg, package):
        """cfg = ConfigContainer(train=TrainingConfig(a=1), mixed_precision="bf16_mixed")."""
        for kw in call.keywords:
            if kw.arg is None:
                continue
            v = kw.value
            if isinstance(v, ast.Call) and not (isinstance(v.func, ast.Name) and self.find(v.func.id, package)):
                for kw2 in v.keywords:
                    if kw2.arg:
                        cfg[prefix + kw.arg + "." + kw2.arg] = self.value(kw2.value, env, cfg, package)
            else:
                cfg[prefix + kw.arg] = self.value(v, env, cfg, package)

    def call(self, name, call, env, cfg, package):
        found = self.find(name, package)
        if not found or self.depth > 20:
            return None
        pkg, path, fn, consts = found
        inner = dict(consts)
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args] + [a.arg for a in fn.args.kwonlyargs]
        defaults = {}
        pos = fn.args.posonlyargs + fn.args.args
        for a, d in zip(pos[len(pos) - len(fn.args.defaults):], fn.args.defaults):
            defaults[a.arg] = d
        for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
            if d is not None:
                defaults[a.arg] = d
        for p_, d in defaults.items():
            inner[p_] = self.value(d, {}, cfg, pkg)
        for p_, a in zip(params, call.args):
            if isinstance(a, ast.Name) and isinstance(env.get(a.id), Ref):
                inner[p_] = env[a.id]
            else:
                ref = self.ref_of(a, env) if isinstance(a, ast.Attribute) else None
                inner[p_] = Ref(ref + ".") if ref is not None and cfg.get(ref) is None else \
                    self.value(a, env, cfg, package)
        for kw in call.keywords:
            if kw.arg:
                inner[kw.arg] = self.value(kw.value, env, cfg, package)
        self.depth += 1
        self.file_stack.append(path)
        try:
            r = self.body(fn.body, inner, cfg, pkg)
            return r.value if isinstance(r, Returned) else None
        finally:
            self.depth -= 1
            self.file_stack.pop()

    def test(self, node, env, cfg, package):
        """True / False / None (not decidable)."""
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a = self.value(node.left, env, cfg, package)
            b = self.value(node.comparators[0], env, cfg, package)
            if isinstance(a, Unknown) or isinstance(b, Unknown) or isinstance(a, Ref) or isinstance(b, Ref):
                return None
            op = node.ops[0]
            if isinstance(op, ast.Is):
                return a is b or a == b
            if isinstance(op, ast.IsNot):
                return not (a is b or a == b)
            if isinstance(op, ast.Eq):
                return a == b
            if isinstance(op, ast.NotEq):
                return a != b
            if isinstance(op, ast.In) and isinstance(b, (list, tuple, str)):
                return a in b
            return None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            r = self.test(node.operand, env, cfg, package)
            return None if r is None else not r
        v = self.value(node, env, cfg, package)
        if isinstance(v, (Unknown, Ref)):
            return None
        return bool(v)

    def body(self, stmts, env, cfg, package):
        for st in stmts:
            if isinstance(st, ast.Return):
                return Returned(self.value(st.value, env, cfg, package) if st.value is not None else None)
            if isinstance(st, ast.Assign) and len(st.targets) == 1:
                t = st.targets[0]
                v = st.value
                if isinstance(t, ast.Name):
                    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "ConfigContainer":
                        cfg.clear()
                        self.assign_container("", v, env, cfg, package)
                        env[t.id] = Ref("")
                    elif isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and self.find(v.func.id, package) \
                            and PRETRAIN.search(v.func.id) or (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                                                                and v.func.id in ("_pretrain_common",)):
                        sub = {}
                        self.call(v.func.id, v, {}, sub, package)
                        cfg.clear()
                        cfg.update(sub)
                        env[t.id] = Ref("")
                    else:
                        env[t.id] = self.value(v, env, cfg, package)
                elif isinstance(t, ast.Attribute):
                    key = self.ref_of(t, env)
                    if key is None:
                        continue
                    hf = [c for c in ast.walk(v) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                          and c.func.attr == "from_hf_pretrained" and c.args]
                    if hf:
                        cfg[key + "._hf_model"] = self.value(hf[0].args[0], env, cfg, package)
                        continue
                    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id.endswith("Provider"):
                        cfg[key + "._provider"] = v.func.id
                        for kw in v.keywords:
                            if kw.arg:
                                cfg[key + "." + kw.arg] = self.value(kw.value, env, cfg, package)
                        continue
                    val = self.value(v, env, cfg, package)
                    if isinstance(val, Ref):
                        continue
                    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and not isinstance(val, (int, float, str, list)):
                        val = expr_text(v)
                    cfg[key] = val
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                c = st.value
                if isinstance(c.func, ast.Name) and c.func.id == "apply_flex_dispatcher_backend" and len(c.args) >= 2:
                    # megatron/bridge/training/flex_dispatcher_backend.py: a deepep / hybridep
                    # backend switches the dispatcher to "flex" (on the GPUs each backend supports;
                    # DeepEP on GB200 / GB300 falls back to alltoall at run time, which a recipe
                    # named for those GPUs does not ask for).
                    backend = self.value(c.args[1], env, cfg, package)
                    if backend in ("deepep", "hybridep"):
                        cfg["model.moe_token_dispatcher_type"] = "flex"
                        cfg["model.moe_flex_dispatcher_backend"] = backend
                elif isinstance(c.func, ast.Name) and self.find(c.func.id, package):
                    self.call(c.func.id, c, env, cfg, package)
            elif isinstance(st, ast.If):
                r = self.test(st.test, env, cfg, package)
                if r is True:
                    out = self.body(st.body, env, cfg, package)
                    if isinstance(out, Returned):
                        return out
                elif r is False:
                    out = self.body(st.orelse, env, cfg, package)
                    if isinstance(out, Returned):
                        return out
            elif isinstance(st, ast.Try):
                out = self.body(st.body, env, cfg, package)
                if isinstance(out, Returned):
                    return out
        return None


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if v is None:
        return '"None"'
    return '"%s"' % str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def bridge(root, commit, out_dir):
    it = Interp()
    files = []
    for package, sub in (("perf", "src/megatron/bridge/perf_recipes"), ("library", "src/megatron/bridge/recipes")):
        for d, _, fs in os.walk(os.path.join(root, sub)):
            for f in sorted(fs):
                if f.endswith(".py"):
                    it.load(os.path.join(d, f), package)
                    files.append((package, os.path.join(d, f)))
    names = sorted(set(n for n in it.funcs if PRETRAIN.search(n) and not n.startswith("_")) |
                   set(a for a in it.aliases if PRETRAIN.search(a) and not a.startswith("_")))
    keep = re.compile(r"^(model\.(tensor_model|pipeline_model|virtual_pipeline_model|context|expert_model|expert_tensor)"
                      r"_parallel_size|"
                      r"model\.sequence_parallel|model\.seq_length|dataset\.seq_length|train\.(global|micro)_batch_size|"
                      r"train\.train_iters|model\.recompute_[a-z_]+|mixed_precision.*|ddp\.(use_distributed_optimizer|"
                      r"use_megatron_fsdp|data_parallel_sharding_strategy|overlap_grad_reduce|grad_reduce_in_fp32)|"
                      r"comm_overlap\.tp_comm_overlap|model\.cuda_graph_(impl|scope)|model\.pipeline_model_parallel_layout|"
                      r"model\.num_layers_in_(first|last)_pipeline_stage|model\.account_for_[a-z_]+|model\.mtp_num_layers|"
                      r"model\._hf_model|model\._provider|model\.cpu_offloading_num_layers|optimizer\.optimizer|"
                      r"model\.moe_(token_dispatcher_type|flex_dispatcher_backend|expert_capacity_factor|"
                      r"pad_expert_input_to_capacity)|model\.fine_grained_activation_offloading|model\.offload_modules)$")
    lines = [
        "# Megatron-Bridge pre-training recipes: every *_pretrain_*_config function of",
        "# src/megatron/bridge/recipes/ and src/megatron/bridge/perf_recipes/ at NVIDIA-NeMo/Megatron-Bridge",
        "# commit %s (the benchmark recipe where both define a name), evaluated by" % commit,
        "# scripts/extract_launch_recipes.py (ast, nothing run). One table per recipe, keys in the",
        "# ConfigContainer's own paths; model._hf_model is the recipe's AutoBridge.from_hf_pretrained",
        "# id (model._provider a provider class). Only the values stepcast reads are kept; the recipe's",
        "# source file is `source`.",
    ]
    for name in names:
        alias_of = None
        if name in it.funcs:
            defs = it.funcs[name]
            pkg, path = defs[0][0], defs[0][1]
            for d in defs:
                if d[0] == "perf":
                    pkg, path = d[0], d[1]
        else:
            pkg, alias_of, alias_file = it.aliases[name]
            found = it.find(name, pkg)
            if not found:
                continue
            path = found[1]
        cfg = {}
        call = ast.Call(func=ast.Name(id=name), args=[], keywords=[])
        it.call(name, call, {}, cfg, pkg)
        lines.append("")
        lines.append("[%s]" % name)
        lines.append("source = %s" % toml_value(os.path.relpath(path, root)))
        if alias_of:
            lines.append("alias_of = %s" % toml_value(alias_of))
        kept = sorted(k for k in cfg if keep.match(k))
        for k in kept:
            # A value whose path is also a table (mixed_precision = bf16_mixed() and
            # mixed_precision.fp8_recipe = ...): written as <path>._value.
            name_ = k + "._value" if any(o.startswith(k + ".") for o in kept) else k
            lines.append("%s = %s" % (name_, toml_value(cfg[k])))
    open(os.path.join(out_dir, "megatron-bridge.toml"), "w").write("\n".join(lines) + "\n")


def nemo(root, commit, out_dir):
    rdir = os.path.join(root, "nemo/collections/llm/recipes")
    lines = [
        "# NeMo 2 pre-training recipes (nemo llm pretrain --factory NAME): nemo/collections/llm/recipes/<NAME>.py",
        "# at NVIDIA/NeMo commit %s, read by scripts/extract_launch_recipes.py (ast): the trainer" % commit,
        "# helper's parallelism arguments as pretrain_recipe() passes them (its own defaults, else the",
        "# helper's), its MockDataModule(...) keywords, and model()'s config (class or NAME). Keys:",
        "# trainer.strategy.<MegatronStrategy field>, data.<field>, model.config.",
    ]
    arg_to_field = {"tensor_parallelism": "tensor_model_parallel_size", "pipeline_parallelism": "pipeline_model_parallel_size",
                    "virtual_pipeline_parallelism": "virtual_pipeline_model_parallel_size",
                    "context_parallelism": "context_parallel_size", "sequence_parallelism": "sequence_parallel",
                    "expert_parallelism": "expert_model_parallel_size",
                    "expert_tensor_parallelism": "expert_tensor_parallel_size"}
    trees = {}
    for f in sorted(os.listdir(rdir)):
        if f.endswith(".py"):
            trees[f[:-3]] = ast.parse(open(os.path.join(rdir, f)).read())
    all_funcs = {}
    for mod, tree in trees.items():
        for n in tree.body:
            if isinstance(n, ast.FunctionDef):
                all_funcs.setdefault(n.name, (mod, n))

    def defaults_of(fn):
        out = {}
        pos = fn.args.args
        for a, d in zip(pos[len(pos) - len(fn.args.defaults):], fn.args.defaults):
            try:
                out[a.arg] = ast.literal_eval(d)
            except Exception:
                out[a.arg] = "<expr: %s>" % ast.unparse(d)
        for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
            if d is not None:
                try:
                    out[a.arg] = ast.literal_eval(d)
                except Exception:
                    out[a.arg] = "<expr: %s>" % ast.unparse(d)
        return out

    for mod, tree in trees.items():
        if mod.startswith("_"):
            continue
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        consts = {}
        for n in tree.body:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                try:
                    consts[n.targets[0].id] = ast.literal_eval(n.value)
                except Exception:
                    pass
        if "pretrain_recipe" not in funcs:
            continue
        pre = funcs["pretrain_recipe"]
        env = dict(consts)
        env.update(defaults_of(pre))

        def val(node):
            try:
                return ast.literal_eval(node)
            except Exception:
                pass
            if isinstance(node, ast.Name) and node.id in env:
                return env[node.id]
            return "<expr: %s>" % ast.unparse(node)

        vals = {}
        for node in ast.walk(pre):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.endswith("trainer"):
                helper = funcs.get(node.func.id) or (all_funcs.get(node.func.id) or (None, None))[1]
                if helper is not None:
                    for k, v in defaults_of(helper).items():
                        if k in arg_to_field:
                            vals["trainer.strategy." + arg_to_field[k]] = v
                for kw in node.keywords:
                    if kw.arg in arg_to_field:
                        vals["trainer.strategy." + arg_to_field[kw.arg]] = val(kw.value)
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) and \
                    node.args[0].id == "MockDataModule":
                for kw in node.keywords:
                    if kw.arg in ("seq_length", "global_batch_size", "micro_batch_size"):
                        vals["data." + kw.arg] = val(kw.value)
        if "model" in funcs:
            text = ast.unparse(funcs["model"])
            m = re.findall(r"\b(\w+Config\w*)\b", text)
            m = [x for x in m if x != "run.Config" and x != "Config"]
            if m:
                vals["model.config"] = m[-1]
            elif "NAME" in consts:
                vals["model.config"] = consts["NAME"]
        if "data.seq_length" not in vals:
            continue
        lines.append("")
        lines.append("[%s]" % mod)
        lines.append("source = %s" % toml_value("nemo/collections/llm/recipes/%s.py" % mod))
        for k in sorted(vals):
            lines.append("%s = %s" % (k, toml_value(vals[k])))
    open(os.path.join(out_dir, "nemo.toml"), "w").write("\n".join(lines) + "\n")


def main():
    b_root, b_commit, n_root, n_commit, out_dir = sys.argv[1:6]
    bridge(b_root, b_commit, out_dir)
    nemo(n_root, n_commit, out_dir)


if __name__ == "__main__":
    main()
