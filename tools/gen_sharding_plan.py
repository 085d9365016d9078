"""Write ``profiles/mlx_lm/sharding.yaml`` from the installed mlx-lm's model sources (no mlx import).

Why a generator: the plan must say what mlx-lm *does*, and mlx-lm says it in each module's
``Model.shard`` (tensor parallelism) and in whether the module's inner model mixes in
``PipelineMixin`` (pipeline parallelism, ``model.model.pipeline(group)``). Reading those with ``ast``
keeps the data file a faithful transcript, and ``tests/test_sharding_plan.py`` re-runs this reader and
fails when the committed file drifts from the installed mlx-lm.

What is read from ``Model.shard``:

* ``shard_linear(X, "all-to-sharded" | "sharded-to-all")`` and ``shard_inplace(X, ...)``: the projection
  path ``X`` (without the ``layer.`` / ``attn.`` style loop variable) and the way it splits;
* ``X.apply(f)`` (DeepSeek's per-head ``embed_q`` / ``unembed_out``): split along the head axis;
* ``X = mx.contiguous(mx.split(X, N)[rank])``: a per-head vector split evenly;
* ``X //= N``: a count divided by the group size (heads, KV heads);
* ``X = X[a:b]`` (or an expression slicing ``X``) and ``X = Cls.from_x(X, group=group)``: a parameter cut to the
  rank's heads or rebuilt for the group (gpt_oss sinks, a recurrence's conv weight / ``A_log``, a sharded
  RMSNorm): split evenly;
* locals: ``attn = layer.self_attn``; ``for attn in layer.self_attn`` (a module list: ``self_attn.*``);
  ``for mlp in (moe.switch_mlp, moe.shared_experts)`` (each); ``g = self.model.gate_projections[i]`` (``.*``);
* the module's own ``pipeline`` override, if any: how it assigns layers to ranks (``pipeline_split``);
* a module whose ``shard`` only calls another module's ``Model.shard`` takes that module's plan (``via``).

What follows from it, by projection *role* (never by model type), for the resident caches per rank:
attention K/V rows are divided when a K/V-producing projection is ``all-to-sharded`` (each rank then
computes ``kv_heads / N`` heads); the MLA latent and the DSA indexer caches come from projections no
module shards (``kv_a_proj_with_mqa``, the indexer's ``wk``), so every rank keeps them whole; a
recurrent state is divided when the mixer's input projection is ``all-to-sharded``.

Usage: ``python tools/gen_sharding_plan.py [MLX_LM_MODELS_DIR] [--check]``.
"""
from __future__ import annotations

import ast
import copy
import sys
from pathlib import Path

# Projections whose output becomes the attention cache's keys / values (names as mlx-lm spells them).
KV_PROJECTIONS = {"k_proj", "v_proj", "kv_b_proj", "qkv_proj", "qkvg_proj", "wqkv", "query_key_value"}
# Projections feeding a recurrent mixer's state (gated DeltaNet, Mamba).
STATE_PROJECTIONS = {"in_proj_qkv", "in_proj_qkvz", "in_proj", "in_proj_z"}
# Per-head parameters of a recurrence (decay, time step): cut to the rank's heads, the state is divided too.
STATE_PARAMS = {"A_log", "dt_bias"}
# Loop variables / locals the shard methods use for a layer or its parts: dropped from paths.
_PREFIX_VARS = {"layer", "l", "block"}


def _path(node: ast.AST, aliases: dict[str, list[str]]) -> list[str]:
    """The plan paths ``node`` names: a local standing for several paths (``for mlp in (a, b)``) gives each."""
    s = ast.unparse(node)
    head, _, rest = s.partition(".")
    if head in aliases:
        return [a + ("." + rest if rest else "") for a in aliases[head]]
    if head in _PREFIX_VARS or head == "self":
        return [rest]
    return [s]


def _aliases(fn: ast.FunctionDef) -> dict[str, list[str]]:
    """Locals such as ``attn = layer.self_attn`` -> ``{"attn": ["self_attn"]}``; a loop over a module list
    (``for attn in layer.self_attn``) stands for its items (``self_attn.*``), a loop over a tuple of modules
    (``for mlp in (moe.switch_mlp, moe.shared_experts)``) for each of them. A local assigned several times
    stands for every value it takes."""
    out: dict[str, list[str]] = {}

    def add(name: str, paths: list[str]) -> None:
        out.setdefault(name, [])
        out[name] += [p for p in paths if p not in out[name]]

    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and isinstance(n.value, ast.Attribute):
            add(n.targets[0].id, _path(n.value, out))
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and isinstance(n.value, ast.Subscript) and isinstance(n.value.value, ast.Attribute):
            # ``gate_proj = self.model.gate_projections[i]``: an item of a module list
            add(n.targets[0].id, [q + ".*" for q in _path(n.value.value, out)])
        elif isinstance(n, ast.For) and isinstance(n.target, ast.Name):
            it = n.iter
            if isinstance(it, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Attribute) for e in it.elts):
                add(n.target.id, [q for e in it.elts for q in _path(e, out)])
            elif isinstance(it, ast.Attribute):
                paths = _path(it, out)
                if paths != ["layers"] and not any(p.endswith(".layers") or p == "model.layers" for p in paths):
                    add(n.target.id, [p + ".*" for p in paths])
    return out


def _mode(call: ast.Call) -> str:
    if len(call.args) > 1 and isinstance(call.args[1], ast.Constant):
        return str(call.args[1].value)
    for kw in call.keywords:
        if kw.arg == "sharding" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    arg = call.args[1] if len(call.args) > 1 else None
    # gpt_oss passes the mode through a variable; a lambda returning axis 0 splits rows like all-to-sharded
    if arg is not None:
        src = ast.unparse(arg)
        if "sharded-to-all" in src:
            return "sharded-to-all"
        return "custom"
    return "custom"


def _resolve_mode_vars(fn: ast.FunctionDef) -> dict[str, str]:
    """``mode = "all-to-sharded"`` style locals, for calls that pass the mode through a name."""
    out: dict[str, str] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = n.value.value
    return out


def read_shard(fn: ast.FunctionDef) -> dict:
    al = _aliases(fn)
    modevars = _resolve_mode_vars(fn)
    a2s: list[str] = []
    s2a: list[str] = []
    custom: list[str] = []
    heads: list[str] = []
    divided: list[str] = []
    delegates: list[str] = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else "")
            if name in ("shard_linear", "shard_inplace") and n.args:
                ps = _path(n.args[0], al)
                m = _mode(n)
                if m == "custom" and len(n.args) > 1 and isinstance(n.args[1], ast.Name):
                    m = modevars.get(n.args[1].id, "custom")
                {"all-to-sharded": a2s, "sharded-to-all": s2a}.get(m, custom).extend(ps)
            elif name == "apply" and isinstance(f, ast.Attribute):
                heads.extend(_path(f.value, al))
            elif name == "shard" and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                delegates.append(f.value.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.op, ast.FloorDiv):
            divided.extend(_path(n.target, al))
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and "mx.split(" in ast.unparse(n.value):
            heads.extend(_path(n.targets[0], al))
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Attribute):
            # a parameter replaced by a slice of itself (gpt_oss ``sinks = sinks[h * R: h * (R + 1)]``, a conv
            # weight or ``A_log`` cut to the rank's heads) or rebuilt from itself for the group
            # (``ShardedRMSNorm.from_rms_norm(norm, group=group)``): split evenly
            targets = _path(n.targets[0], al)
            inner = [q for x in ast.walk(n.value) if isinstance(x, (ast.Attribute, ast.Name))
                     for q in _path(x, al)]
            sliced = any(isinstance(x, ast.Subscript) for x in ast.walk(n.value))
            regrouped = isinstance(n.value, ast.Call) and any(k.arg == "group" for k in n.value.keywords) \
                and not any(isinstance(x, ast.Call) and getattr(x.func, "id", getattr(x.func, "attr", ""))
                            in ("shard_linear", "shard_inplace") for x in ast.walk(n.value))
            for t in targets:
                if t in inner and (sliced or regrouped):
                    custom.append(t)
    uniq = lambda xs: sorted(set(xs))  # noqa: E731
    return {"all_to_sharded": uniq(a2s), "sharded_to_all": uniq(s2a), "custom": uniq(custom),
            "heads": uniq(heads), "divided": uniq(divided), "delegates": delegates}


def _imports(tree: ast.Module) -> dict[str, str]:
    """Imported name -> source module (``from .deepseek_v3 import Model as DeepseekV3LM``)."""
    out = {}
    for n in tree.body:
        if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module:
            for a in n.names:
                out[a.asname or a.name] = n.module
    return out


def _pipeline_classes(tree: ast.Module) -> set[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef):
            bases = {ast.unparse(b) for b in n.bases}
            if "PipelineMixin" in bases or any(isinstance(b, ast.FunctionDef) and b.name == "pipeline" for b in n.body):
                out.add(n.name)
    return out


def _model_class(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)


def _exposes_pipeline(tree: ast.Module, pipeline_names: set[str]) -> bool:
    """Does ``Model`` expose a pipelined inner model as ``model.model`` (what ``sharded_load`` checks)?

    Either ``self.model = <a PipelineMixin class>(...)`` in the Model class, or a ``model`` property on a
    module that defines or imports a PipelineMixin class (the VLM wrappers' ``language_model.model``)."""
    cls = _model_class(tree)
    if cls is None or not pipeline_names:
        return False
    for n in ast.walk(cls):
        if isinstance(n, ast.FunctionDef) and n.name == "model":
            return True
        if isinstance(n, ast.Assign) and any(ast.unparse(t) == "self.model" for t in n.targets) \
                and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) in pipeline_names:
            return True
    return False


def _pipeline_fns(trees: dict[str, ast.Module], m: str, names: set[str]) -> list[ast.FunctionDef]:
    """The ``pipeline`` methods the pipelined classes ``names`` of module ``m`` define themselves (a class
    imported from another module is looked up there)."""
    imps = _imports(trees[m])
    out = []
    for name in sorted(names):
        tree = trees.get(imps.get(name, m), trees[m])
        for n in tree.body:
            if isinstance(n, ast.ClassDef) and n.name == name:
                out += [b for b in n.body if isinstance(b, ast.FunctionDef) and b.name == "pipeline"]
    return out


def pipeline_split(fns: list[ast.FunctionDef]) -> str:
    """How the module's ``pipeline(group[, split])`` assigns layers to ranks.

    ``mixin``: ``PipelineMixin.pipeline`` (no override, or one that passes ``split`` through to it or to an
    inner model's): an even split where the low ranks take the extra layers, or the given ``split``.
    ``own_default``: an override that computes its own ``split`` when none is given, then calls the mixin
    (bailing_hybrid: whole layer groups): an explicit split is the mixin's, the default is not.
    ``extra_to_first_layers``: an override that does not call the mixin and gives the extra layers to the
    segments of the first layers (the high ranks), with no ``split`` argument (kimi_k3).
    ``own``: any other rule (not modelled: the estimator refuses it)."""
    rule = "mixin"
    for fn in fns:
        src = ast.unparse(fn)
        assigns_split = any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "split"
                                                              for t in n.targets) for n in ast.walk(fn))
        if "super().pipeline(" in src:
            if assigns_split:
                rule = "own_default"
        elif ".pipeline(" in src and not assigns_split:
            continue  # hands (group, split) to an inner model's pipeline
        elif "self.pipeline_size - self.pipeline_rank - 1" in src.replace("(", "").replace(")", "") \
                and "seg < extra" in src and len(fn.args.args) == 2:
            rule = "extra_to_first_layers"
        else:
            return "own"
    return rule


def _parent_module(tree: ast.Module) -> str | None:
    """The module whose ``Model`` this one re-exports or subclasses, if any."""
    imps = _imports(tree)
    cls = _model_class(tree)
    if cls is None:
        return imps.get("Model")
    for b in cls.bases:
        name = ast.unparse(b)
        # ``from .x import Model as Base`` or ``from . import x`` then ``class Model(x.Model)``
        src = imps.get(name) or (name.split(".")[0] if name.endswith(".Model") else None)
        if src:
            return src
    return None


def _model_shard(tree: ast.Module) -> ast.FunctionDef | None:
    for n in tree.body:
        if isinstance(n, ast.ClassDef) and n.name == "Model":
            for b in n.body:
                if isinstance(b, ast.FunctionDef) and b.name == "shard":
                    return b
    return None


def _caches(plan: dict) -> dict[str, str]:
    leaf = lambda p: p.rsplit(".", 1)[-1]  # noqa: E731
    split = plan["all_to_sharded"] + plan["custom"]
    att = "divided" if any(leaf(p) in KV_PROJECTIONS and "linear_attn" not in p for p in split) else "replicated"
    st = "divided" if any(leaf(p) in STATE_PROJECTIONS for p in plan["all_to_sharded"]) \
        or any(leaf(p) in STATE_PARAMS for p in plan["custom"]) else "replicated"
    return {"attention": att, "latent": "replicated", "indexer": "replicated", "state": st}


def read_modules(models_dir: Path) -> dict[str, dict]:
    trees = {f.stem: ast.parse(f.read_text(encoding="utf-8")) for f in sorted(models_dir.glob("*.py"))}
    pipes = {m: _pipeline_classes(t) for m, t in trees.items()}
    raw: dict[str, dict] = {}
    for m, t in trees.items():
        fn = _model_shard(t)
        imps = _imports(t)
        names = (pipes[m] - {"PipelineMixin"}) | {name for name, src in imps.items()
                                                   if name != "PipelineMixin" and name in pipes.get(src, ())}
        pipeline = _exposes_pipeline(t, names)
        if m == "pipeline":
            continue
        entry: dict = {"pipeline": pipeline}
        rule = pipeline_split(_pipeline_fns(trees, m, names)) if pipeline else "mixin"
        if rule != "mixin":
            entry["pipeline_split"] = rule
        if fn is not None:
            entry["_shard"] = read_shard(fn)
            entry["_imports"] = imps
        if fn is not None or pipeline:
            raw[m] = entry
    out: dict[str, dict] = {}
    for m, e in sorted(raw.items()):
        plan = e.pop("_shard", None)
        imps = e.pop("_imports", {})
        rec: dict = {}
        if plan is not None:
            via = None
            if not (plan["all_to_sharded"] or plan["sharded_to_all"]) and plan["delegates"]:
                via = next((imps[d] for d in plan["delegates"] if d in imps), None)
                if via is not None:
                    plan = read_shard(_model_shard(trees[via]))
            t = {k: plan[k] for k in ("all_to_sharded", "sharded_to_all", "heads", "divided") if plan[k]}
            if plan["custom"]:
                t["custom"] = plan["custom"]
            t["vocab"] = "sharded" if any(p.rsplit(".", 1)[-1] == "lm_head" for p in plan["all_to_sharded"]) \
                else "replicated"
            t["caches"] = _caches(plan)
            if via:
                t["via"] = via
            rec["tensor"] = t
        rec["pipeline"] = e["pipeline"]
        if "pipeline_split" in e:
            rec["pipeline_split"] = e["pipeline_split"]
        out[m] = rec
    # a Model that subclasses (glm_moe_dsa -> deepseek_v32) or re-exports (solar_open -> glm4_moe) another
    # module's Model inherits its plan; repeated until nothing changes, for chains
    changed = True
    while changed:
        changed = False
        for m, t in trees.items():
            src = _parent_module(t)
            if m in out or m == "pipeline" or src not in out:
                continue
            rec = copy.deepcopy(out[src])
            if "tensor" in rec:
                rec["tensor"]["via"] = src
            out[m] = rec
            changed = True
    return dict(sorted(out.items()))


HEADER = """\
# yaml-language-server: $schema=../../schema/v1/sharding.schema.json
# How mlx-lm {version} shards each model module across an mlx.distributed group, read from the module's
# Model.shard (tensor) and from whether its inner model is a PipelineMixin (pipeline: model.model.pipeline).
# GENERATED by tools/gen_sharding_plan.py from the installed mlx-lm; tests/test_sharding_plan.py fails on drift.
# tensor.all_to_sharded / sharded_to_all: projections (paths under a decoder layer) split on the output /
#   input axis; heads: tensors split along the head axis; divided: counts divided by the group size;
#   custom: shard_inplace with a custom rule (bytes split evenly); vocab: whether lm_head is split;
#   caches: per cache kind, whether a rank holds 1/N of it (divided) or all of it (replicated).
"""


def render(modules: dict[str, dict], version: str) -> str:
    import yaml

    body = yaml.safe_dump({"mlx_lm": version, "modules": modules}, sort_keys=False, default_flow_style=None,
                          width=110)
    return HEADER.format(version=version) + body


def main(argv: list[str]) -> int:
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    if args:
        models = Path(args[0])
        version = "unknown"
    else:
        import importlib.metadata as md
        import importlib.util

        spec = importlib.util.find_spec("mlx_lm")
        models = Path(spec.origin).parent / "models"
        version = md.version("mlx-lm")
    text = render(read_modules(models), version)
    out = Path(__file__).resolve().parents[1] / "profiles" / "mlx_lm" / "sharding.yaml"
    if check:
        same = out.is_file() and out.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{out} drifted from mlx-lm {version}; rerun tools/gen_sharding_plan.py")
        return 0 if same else 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
