#!/usr/bin/env python3
"""check_loader.py: fp8a_recipe (python/fp8a_recipe.py, imported as pip installed it in
the venv) on the golden recipe_*.json of tests/golden/reports/ and the samples of
tests/consumers/samples/loader/, with TE's real recipe module (loaded by path, as the other
checks do; the venv has no importable transformer_engine package).

Expected values are written here from the JSON files, not taken from the loader: the TE class and
each field of the recipe object, the layers and BF16 GEMMs, recipe_for() on Megatron-style
("module.decoder.layers...") and nvdlfw-style ("model.decoder.layers...") names, the module
plan, every RecipeJsonError with its message, and the "env" rules (set before TE's own import, an
error after it). Two parts run in a fresh interpreter: load() importing transformer_engine itself
(TE's real recipe file in a stand-in package on PYTHONPATH) and the NVTE_* variables it sets."""
import ast
import copy
import json
import os
import subprocess
import sys
import tempfile

from _common import CAPTURE_SRC, TE_SRC, CheckFailed, installed_module, main, te_recipe_module

HERE = os.path.dirname(os.path.abspath(__file__))
G = os.path.join(HERE, "..", "golden", "reports")
S = os.path.join(HERE, "samples", "loader")
FP32 = "NVTE_FP8_BLOCK_SCALING_FP32_SCALES"
GOLDENS = ("recipe_all_bf16.json", "recipe_block_fp32.json", "recipe_delayed.json",
           "recipe_mixed.json", "recipe_mxfp8_floor.json", "recipe_plan_all_bf16.json")


class Checks:
    def __init__(self):
        self.n = 0

    def eq(self, what, got, want):
        self.n += 1
        if got != want:
            raise CheckFailed("%s: got %r, expected %r" % (what, got, want))

    def true(self, what, cond):
        self.eq(what, bool(cond), True)

    def raises(self, loader, what, fn, want):
        """fn() raises RecipeJsonError, one line, containing each string of want."""
        self.n += 1
        try:
            fn()
        except loader.RecipeJsonError as e:
            msg = str(e)
            if not isinstance(e, ValueError) or "\n" in msg or any(w not in msg for w in want):
                raise CheckFailed("%s: message %r, expected one line with %r" % (what, msg, want))
            return
        raise CheckFailed("%s: no RecipeJsonError, expected %r" % (what, want))


def _golden(name):
    with open(os.path.join(G, name), encoding="utf-8") as f:
        return json.load(f)


def _without_env(fn, env=None):
    """fn() with TE's import-time variables unset in os.environ but those of env, restored
    afterwards."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("NVTE_")}
    for k in saved:
        del os.environ[k]
    os.environ.update(env or {})
    try:
        return fn()
    finally:
        for k in [k for k in os.environ if k.startswith("NVTE_")]:
            del os.environ[k]
        os.environ.update(saved)


def check_goldens(c, loader, te, te_fp32):
    for name in GOLDENS:
        doc = _golden(name)
        path = os.path.join(G, name)
        block = name == "recipe_block_fp32.json"  # TE imported with its env, as the file says
        adv = _without_env(lambda: loader.load(path, te_recipe=te_fp32 if block else te),
                           env={FP32: "1"} if block else None)
        r = doc["recipe"]
        if r is None:
            c.eq(name + " recipe", adv.recipe, None)
        else:
            c.eq(name + " class", type(adv.recipe).__name__, r["class"])
            c.true(name + " is a TE Recipe", isinstance(adv.recipe, (te_fp32 if block else te).Recipe))
            c.eq(name + " fp8_format", adv.recipe.fp8_format.name, r["fp8_format"])
            for k, v in r.items():
                if k not in ("class", "fp8_format", "env"):
                    c.eq("%s %s" % (name, k), getattr(adv.recipe, k), v)
        plan = (doc.get("module_plan") or {}).get("modules", [])
        c.eq(name + " module_recipes", sorted(adv.module_recipes), sorted(m["layer"] for m in plan))
        for m in plan:
            got = adv.module_recipes[m["layer"]]
            if m["recipe"] is None:
                c.eq("%s module %s" % (name, m["layer"]), got, None)
            else:
                c.eq("%s module %s class" % (name, m["layer"]), type(got).__name__, m["recipe"]["class"])
                c.eq("%s module %s format" % (name, m["layer"]), got.fp8_format.name,
                     m["recipe"]["fp8_format"])
        c.eq(name + " layer names", list(adv.layers), [l["layer"] for l in doc["layers"]])
        for l in doc["layers"]:
            p = adv.layers[l["layer"]]
            c.eq(name + " precision", p.precision, l["precision"])
            c.eq(name + " fp8_safe", p.fp8_safe, l["fp8_safe"])
            c.eq(name + " incomplete", p.incomplete, l["incomplete"])
            c.eq(name + " gemms", p.gemms, {g: d["precision"] for g, d in l["gemms"].items()})
            c.eq(name + " reasons", p.reasons, l["reasons"])
        c.eq(name + " bf16_gemms", adv.bf16_gemms(),
             [(l["layer"], g) for l in doc["layers"] for g in ("fprop", "dgrad", "wgrad")
              if l["gemms"][g]["precision"] == "bf16"])
        c.eq(name + " bf16_layers", adv.bf16_layers(),
             [l["layer"] for l in doc["layers"] if l["precision"] == "bf16"])
        # Every module the plan does not name gets the global recipe (None: all BF16); a named one
        # its own.
        for fqn in ("module.decoder.layers.3.mlp.linear_fc2", "model.decoder.layers.0.mlp.linear_fc1"):
            own = [m for m in plan if fqn.endswith("." + m["layer"])]
            want = adv.module_recipes[own[0]["layer"]] if own else adv.recipe
            c.true(name + " recipe_for " + fqn, adv.recipe_for(fqn) is want)

    # The same files, by hand, as a second opinion on the loop above.
    adv = loader.load(os.path.join(G, "recipe_delayed.json"), te_recipe=te)
    c.true("delayed class", type(adv.recipe) is te.DelayedScaling)
    c.eq("delayed", (adv.recipe.margin, adv.recipe.amax_history_len, adv.recipe.amax_compute_algo,
                     adv.recipe.fp8_format), (1, 16, "most_recent", te.Format.HYBRID))
    c.eq("delayed layers", list(adv.layers), ["layers.3.mlp.linear_fc2"])
    c.eq("delayed bf16_gemms", adv.bf16_gemms(), [])
    adv = loader.load(os.path.join(G, "recipe_mixed.json"), te_recipe=te)
    c.true("mixed class", type(adv.recipe) is te.Float8CurrentScaling)
    c.eq("mixed", (adv.recipe.use_power_2_scales, adv.recipe.fp8_format), (False, te.Format.HYBRID))
    c.eq("mixed layer precisions", [(k, p.precision) for k, p in adv.layers.items()],
         [("layers.0.self_attention.linear_qkv", "fp8"), ("layers.0.mlp.linear_fc2", "mixed"),
          ("layers.0.mlp.linear_fc1", "fp8")])
    c.eq("mixed bf16_gemms", adv.bf16_gemms(),
         [("layers.0.mlp.linear_fc2", "dgrad"), ("layers.0.mlp.linear_fc2", "wgrad"),
          ("layers.0.mlp.linear_fc1", "dgrad"), ("layers.0.mlp.linear_fc1", "wgrad")])
    c.eq("mixed bf16_layers", adv.bf16_layers(), [])
    # Its module plan keeps FC2 in BF16 and QKV on the chosen recipe.
    c.eq("mixed recipe_for fc2", adv.recipe_for("model.decoder.layers.0.mlp.linear_fc2"), None)
    c.true("mixed recipe_for qkv",
           type(adv.recipe_for("model.decoder.layers.0.self_attention.linear_qkv")) is te.Float8CurrentScaling)
    adv = loader.load(os.path.join(G, "recipe_mxfp8_floor.json"), te_recipe=te)
    c.true("mxfp8 class", type(adv.recipe) is te.MXFP8BlockScaling)
    c.eq("mxfp8 format", adv.recipe.fp8_format, te.Format.E4M3)
    # All BF16: no TE needed (and none importable here), the plan is every GEMM in BF16.
    adv = loader.load(os.path.join(G, "recipe_all_bf16.json"))
    c.eq("all_bf16 recipe", adv.recipe, None)
    c.true("all_bf16 imports no TE", loader.TE_RECIPE_MODULE not in sys.modules)
    c.eq("all_bf16 bf16_layers", adv.bf16_layers(), ["layers.0.mlp.linear_fc1"])
    c.eq("all_bf16 bf16_gemms", adv.bf16_gemms(), [("layers.0.mlp.linear_fc1", g) for g in ("fprop", "dgrad", "wgrad")])
    c.eq("all_bf16 recipe_for", adv.recipe_for("model.decoder.layers.0.mlp.linear_fc1"), None)
    # A chosen candidate whose plan keeps no GEMM in FP8: BF16 too, a module never captured included.
    adv = loader.load(os.path.join(G, "recipe_plan_all_bf16.json"))
    c.eq("plan_all_bf16 recipe", adv.recipe, None)
    c.eq("plan_all_bf16 recipe_for uncaptured", adv.recipe_for("decoder.layers.5.self_attention.linear_qkv"), None)
    # A dict in place of a path.
    adv = loader.load(_golden("recipe_delayed.json"), te_recipe=te)
    c.eq("dict load", adv.recipe.amax_history_len, 16)


def check_block_env(c, loader, te, te_fp32):
    path = os.path.join(G, "recipe_block_fp32.json")
    adv = _without_env(lambda: loader.load(path, te_recipe=te_fp32), env={FP32: "1"})
    c.true("block class", type(adv.recipe) is te_fp32.Float8BlockScaling)
    c.eq("block fp32 scales", (adv.recipe.use_f32_scales, adv.recipe.fp8_quant_fwd_inp.power_2_scale,
                               adv.recipe.fp8_quant_bwd_grad.power_2_scale), (True, False, False))
    # TE imported without the variable: the file says what to set.
    want = [path + ": at /recipe/env/" + FP32,
            "set NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1 before importing transformer_engine"]
    c.raises(loader, "block, TE imported without env", lambda: _without_env(lambda: loader.load(path, te_recipe=te)),
             want + ["imported with it unset"])
    # Set after TE's import: os.environ agrees, TE's classes do not.
    def set_late():
        os.environ[FP32] = "1"
        loader.load(path, te_recipe=te)
    c.raises(loader, "block, env set after TE's import", lambda: _without_env(set_late),
             want[:1] + ["imported without NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1",
                         "fp8_quant_fwd_inp.power_2_scale is True", want[1]])
    def other_value():
        os.environ[FP32] = "0"
        loader.load(path, te_recipe=te)
    c.raises(loader, "block, env another value", lambda: _without_env(other_value),
             want + ["imported with NVTE_FP8_BLOCK_SCALING_FP32_SCALES=0"])


def check_module_plan(c, loader, te):
    path = os.path.join(S, "good_module_plan.json")
    adv = loader.load(path, te_recipe=te)
    c.true("plan global", type(adv.recipe) is te.Float8CurrentScaling)
    c.eq("plan modules", sorted(adv.module_recipes),
         sorted(["layers.0.self_attention.linear_qkv", "layers.3.mlp.linear_fc2",
                 "decoder.layers.1.mlp.linear_fc1", "layers.1.mlp.linear_fc1"]))
    c.eq("plan qkv", adv.module_recipes["layers.0.self_attention.linear_qkv"], None)
    fc2 = adv.module_recipes["layers.3.mlp.linear_fc2"]
    c.true("plan fc2 class", type(fc2) is te.MXFP8BlockScaling)
    fc1 = adv.module_recipes["decoder.layers.1.mlp.linear_fc1"]
    c.true("plan fc1 class", type(fc1) is te.DelayedScaling)
    c.eq("plan fc1", (fc1.margin, fc1.amax_history_len, fc1.amax_compute_algo), (0, 16, "max"))
    cases = [
        # Megatron (DDP-wrapped "module.") and nvdlfw ("model.") names, the captured name, a bare suffix
        ("module.decoder.layers.3.mlp.linear_fc2", fc2),
        ("model.decoder.layers.3.mlp.linear_fc2", fc2),
        ("layers.3.mlp.linear_fc2", fc2),
        ("model.decoder.layers.0.self_attention.linear_qkv", None),
        # dot boundary: layers.13 is not layers.3; a name the plan does not hold gets the global recipe
        ("model.decoder.layers.13.mlp.linear_fc2", adv.recipe),
        ("model.decoder.xlayers.3.mlp.linear_fc2", adv.recipe),
        ("mlp.linear_fc2", adv.recipe),
        ("output_layer", adv.recipe),
        # longest match: decoder.layers.1... (Delayed) over layers.1... (BF16)
        ("model.decoder.layers.1.mlp.linear_fc1", fc1),
        ("decoder.layers.1.mlp.linear_fc1", fc1),
        ("module.layers.1.mlp.linear_fc1", None),
        ("model.encoder.layers.1.mlp.linear_fc1", None),
    ]
    for fqn, want in cases:
        c.true("recipe_for(%r)" % fqn, adv.recipe_for(fqn) is want)
    c.eq("plan bf16_layers", adv.bf16_layers(), ["layers.0.self_attention.linear_qkv"])
    c.eq("plan bf16_gemms", adv.bf16_gemms(),
         [("layers.0.self_attention.linear_qkv", g) for g in ("fprop", "dgrad", "wgrad")]
         + [("decoder.layers.1.mlp.linear_fc1", "wgrad")])
    c.eq("plan incomplete", adv.layers["decoder.layers.1.mlp.linear_fc1"].incomplete, True)
    doc = _golden("recipe_mixed.json")
    doc["module_plan"] = None
    c.eq("module_plan null", loader.load(doc, te_recipe=te).module_recipes, {})
    # An all-BF16 module plan needs no TE either.
    doc = _golden("recipe_all_bf16.json")
    doc["module_plan"] = {"note": "", "modules": [{"layer": "layers.0.mlp.linear_fc1", "precision": "bf16",
                                                   "candidate": None, "recipe": None, "reason": "x"}],
                          "predicted": {}}
    adv = loader.load(doc)
    c.eq("all-bf16 plan", (adv.module_recipes, adv.recipe_for("model.layers.0.mlp.linear_fc1")),
         ({"layers.0.mlp.linear_fc1": None}, None))


def _mutated(name, fn):
    doc = copy.deepcopy(_golden(name))
    fn(doc)
    return doc


def _set(path, value):
    def fn(doc):
        d = doc
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return fn


def check_errors(c, loader, te, te_fp32):
    D = "recipe.json (dict): at "
    f = lambda n: os.path.join(S, n)  # noqa: E731
    file_cases = [
        (f("missing.json"), [f("missing.json") + ": at /: cannot read it: No such file or directory"]),
        (f("bad_not_json.json"), [f("bad_not_json.json") + ": at /: not JSON: Expecting"]),
        (f("bad_schema_version.json"), [f("bad_schema_version.json") + ": at /schema_version: 2: expected 1"]),
        (f("bad_module_plan_fp8_null.json"), [f("bad_module_plan_fp8_null.json")
                                              + ": at /module_plan/modules/0/recipe: null for a module planned fp8"]),
        (f("bad_module_plan_margin.json"), [f("bad_module_plan_margin.json")
                                            + ": at /module_plan/modules/1/recipe/margin: DelayedScaling.margin = -2: must be >= 0"]),
    ]
    for path, want in file_cases:
        c.raises(loader, os.path.basename(path), lambda p=path: loader.load(p, te_recipe=te), want)
    delayed, block, mixed = "recipe_delayed.json", "recipe_block_fp32.json", "recipe_mixed.json"
    dict_cases = [
        ("no schema_version", _mutated(delayed, lambda d: d.pop("schema_version")), [D + "/schema_version: null: expected 1"]),
        ("schema_version true", _mutated(delayed, _set(["schema_version"], True)), [D + "/schema_version: true: expected 1"]),
        ("class", _mutated(delayed, _set(["recipe", "class"], "CustomRecipe")),
         [D + "/recipe/class: class 'CustomRecipe': expected one of DelayedScaling, Float8CurrentScaling, "
          "Float8BlockScaling, MXFP8BlockScaling, NVFP4BlockScaling"]),
        ("unknown field", _mutated(delayed, _set(["recipe", "history"], 16)),
         [D + "/recipe/history: unknown key 'history' for DelayedScaling (TE would ignore it); fields: margin,"]),
        ("Recipe attribute not a field", _mutated(mixed, _set(["recipe", "fp8_quant_fwd_inp"], {})),
         [D + "/recipe/fp8_quant_fwd_inp: unknown key 'fp8_quant_fwd_inp' for Float8CurrentScaling"]),
        ("string for int", _mutated(delayed, _set(["recipe", "amax_history_len"], "16")),
         [D + "/recipe/amax_history_len: DelayedScaling.amax_history_len = '16': expected an integer"]),
        ("float for int", _mutated(delayed, _set(["recipe", "margin"], 1.5)),
         [D + "/recipe/margin: DelayedScaling.margin = 1.5: expected an integer"]),
        ("bool for int", _mutated(delayed, _set(["recipe", "margin"], True)),
         [D + "/recipe/margin: DelayedScaling.margin = True: expected an integer"]),
        ("string for bool", _mutated(delayed, _set(["recipe", "reduce_amax"], "yes")),
         [D + "/recipe/reduce_amax: DelayedScaling.reduce_amax = 'yes': expected a boolean"]),
        ("int for string", _mutated(delayed, _set(["recipe", "amax_compute_algo"], 1)),
         [D + "/recipe/amax_compute_algo: DelayedScaling.amax_compute_algo = 1: expected a string or null"]),
        ("MMParams", _mutated(mixed, _set(["recipe", "fp8_gemm_wgrad"], {"use_split_accumulator": 1})),
         [D + "/recipe/fp8_gemm_wgrad/use_split_accumulator: Float8CurrentScaling.fp8_gemm_wgrad.use_split_accumulator = 1: "
          "expected a boolean"]),
        ("recipe not an object", _mutated(delayed, _set(["recipe"], "DelayedScaling")),
         [D + "/recipe: 'DelayedScaling': expected a recipe object, not a string"]),
        ("no recipe key", _mutated(delayed, lambda d: d.pop("recipe")), [D + "/recipe: missing"]),
        ("layers not an array", _mutated(delayed, _set(["layers"], {})), [D + "/layers: {}: expected an array, not an object"]),
        ("layer precision", _mutated(delayed, _set(["layers", 0, "precision"], "fp16")),
         [D + "/layers/0/precision: 'fp16': expected one of fp8, bf16, mixed"]),
        ("gemm precision", _mutated(delayed, _set(["layers", 0, "gemms", "wgrad", "precision"], "mixed")),
         [D + "/layers/0/gemms/wgrad/precision: 'mixed': expected one of fp8, bf16"]),
        ("fp8_format E5M2", _mutated(mixed, _set(["recipe", "fp8_format"], "E5M2")),
         [D + "/recipe/fp8_format: Float8CurrentScaling.fp8_format = 'E5M2': expected one of E4M3, HYBRID"]),
        ("fp8_format lower case", _mutated(delayed, _set(["recipe", "fp8_format"], "hybrid")),
         [D + "/recipe/fp8_format: DelayedScaling.fp8_format = 'hybrid': expected one of E4M3, HYBRID"]),
        ("margin < 0", _mutated(delayed, _set(["recipe", "margin"], -1)),
         [D + "/recipe/margin: DelayedScaling.margin = -1: must be >= 0"]),
        ("amax_history_len < 1", _mutated(delayed, _set(["recipe", "amax_history_len"], 0)),
         [D + "/recipe/amax_history_len: DelayedScaling.amax_history_len = 0: must be >= 1"]),
        ("use_f32_scales", _mutated(block, _set(["recipe", "use_f32_scales"], True)),
         [D + "/recipe/use_f32_scales: Float8BlockScaling.use_f32_scales = true does not change TE's scales; "
          "FP32 block scales need env NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1"]),
        ("use_f32_scales false", _mutated(block, _set(["recipe", "use_f32_scales"], False)),
         [D + "/recipe/use_f32_scales: Float8BlockScaling.use_f32_scales = false does not change TE's scales"]),
        ("env name", _mutated(delayed, _set(["recipe", "env"], {"NVTE_FP8_DELAYED": "1"})),
         [D + "/recipe/env/NVTE_FP8_DELAYED: env NVTE_FP8_DELAYED: not read by TE's recipe module (it reads "
          "NVTE_BACKWARD_OVERRIDE,"]),
        ("env value type", _mutated(block, _set(["recipe", "env"], {FP32: 1})),
         [D + "/recipe/env/NVTE_FP8_BLOCK_SCALING_FP32_SCALES: env NVTE_FP8_BLOCK_SCALING_FP32_SCALES = 1: expected a string"]),
        ("env not an object", _mutated(block, _set(["recipe", "env"], [FP32])),
         [D + "/recipe/env: env = ['NVTE_FP8_BLOCK_SCALING_FP32_SCALES']: expected an object"]),
        ("TE's own check", _mutated(block, _set(["recipe", "w_block_scaling_dim"], 3)),
         [D + "/recipe: TE's Float8BlockScaling rejects it: ValidationError: 1 validation error for Float8BlockScaling "
          "Assertion failed, Only 1D or 2D blocks supported for w"]),
        ("TE's pydantic check", _mutated(delayed, _set(["recipe", "amax_compute_algo"], "mean")),
         [D + "/recipe: TE's DelayedScaling rejects it: ValidationError:"]),
        ("plan layer twice", _mutated(delayed, _set(["module_plan"], {"modules": [
            {"layer": "a", "precision": "bf16", "recipe": None}, {"layer": "a", "precision": "bf16", "recipe": None}]})),
         [D + "/module_plan/modules/1/layer: layer 'a' planned twice"]),
        ("plan bf16 with recipe", _mutated(delayed, _set(["module_plan"], {"modules": [
            {"layer": "a", "precision": "bf16", "recipe": {"class": "MXFP8BlockScaling", "fp8_format": "E4M3"}}]})),
         [D + "/module_plan/modules/0/recipe: a recipe for a module planned bf16 (expected null)"]),
        ("plan precision", _mutated(delayed, _set(["module_plan"], {"modules": [
            {"layer": "a", "precision": "mixed", "recipe": None}]})),
         [D + "/module_plan/modules/0/precision: 'mixed': expected one of fp8, bf16"]),
        ("plan modules", _mutated(delayed, _set(["module_plan"], {"note": ""})),
         [D + "/module_plan/modules: None: expected an array, not null"]),
        ("plan env conflict", _mutated(block, _set(["module_plan"], {"modules": [
            {"layer": "a", "precision": "fp8", "recipe": {"class": "Float8BlockScaling", "fp8_format": "E4M3",
                                                          "env": {FP32: "0"}}}]})),
         [D + "/module_plan/modules/0/recipe/env/NVTE_FP8_BLOCK_SCALING_FP32_SCALES: env "
          "NVTE_FP8_BLOCK_SCALING_FP32_SCALES = '0', but /recipe/env/NVTE_FP8_BLOCK_SCALING_FP32_SCALES = '1'"]),
    ]
    for what, doc, want in dict_cases:
        # recipe_block_fp32.json's env set as it says, so that its other errors show
        r = doc.get("recipe")
        env = {FP32: "1"} if isinstance(r, dict) and r.get("env") == {FP32: "1"} else None
        c.raises(loader, what, lambda d=doc, e=env: _without_env(
            lambda: loader.load(d, te_recipe=te_fp32 if e else te), env=e), want)


# Run in a fresh interpreter with a stand-in transformer_engine package (TE's real recipe file,
# empty package __init__s) on PYTHONPATH: load() imports TE itself, setting the env first.
FRESH = r'''
import os, sys, json
import fp8a_recipe
G, FP32 = sys.argv[1], "NVTE_FP8_BLOCK_SCALING_FP32_SCALES"
assert not [k for k in os.environ if k.startswith("NVTE_")], os.environ
def fails(fn, want):
    try:
        fn()
    except fp8a_recipe.RecipeJsonError as e:
        assert want in str(e), str(e)
        return
    raise AssertionError("no RecipeJsonError: " + want)
# A name TE does not read: reported, and not left in os.environ.
doc = json.load(open(os.path.join(G, "recipe_delayed.json")))
doc["recipe"]["env"] = {"NVTE_FP8_DELAYED": "1"}
fails(lambda: fp8a_recipe.load(doc), "env NVTE_FP8_DELAYED: not read by TE's recipe module")
assert "NVTE_FP8_DELAYED" not in os.environ
del sys.modules["transformer_engine.common.recipe"]
adv = fp8a_recipe.load(os.path.join(G, "recipe_block_fp32.json"))
te = sys.modules["transformer_engine.common.recipe"]
assert type(adv.recipe) is te.Float8BlockScaling, type(adv.recipe)
assert os.environ.get(FP32) == "1", os.environ.get(FP32)
assert adv.recipe.use_f32_scales is True and adv.recipe.fp8_quant_fwd_inp.power_2_scale is False
# Already imported, environment as wanted: fine; another value: set it before importing TE.
assert fp8a_recipe.load(os.path.join(G, "recipe_block_fp32.json")).recipe.fp8_quant_bwd_grad.power_2_scale is False
doc = json.load(open(os.path.join(G, "recipe_block_fp32.json")))
doc["recipe"]["env"][FP32] = "0"
fails(lambda: fp8a_recipe.load(doc), "set NVTE_FP8_BLOCK_SCALING_FP32_SCALES=0 before importing transformer_engine")
assert type(fp8a_recipe.load(os.path.join(G, "recipe_delayed.json")).recipe) is te.DelayedScaling
print("fresh ok")
'''


def check_fresh(c):
    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "transformer_engine", "common", "recipe")
        os.makedirs(pkg)
        for d in (os.path.join(tmp, "transformer_engine"), os.path.join(tmp, "transformer_engine", "common")):
            open(os.path.join(d, "__init__.py"), "w").close()
        with open(os.path.join(TE_SRC, "transformer_engine", "common", "recipe", "__init__.py"), "rb") as src, \
                open(os.path.join(pkg, "__init__.py"), "wb") as dst:
            dst.write(src.read())
        env = {k: v for k, v in os.environ.items() if not k.startswith("NVTE_")}
        env["PYTHONPATH"] = tmp
        p = subprocess.run([sys.executable, "-c", FRESH, G], env=env, cwd=tmp, capture_output=True,
                           text=True, timeout=120)
        c.eq("fresh interpreter: %s" % (p.stderr.strip().splitlines() or [""])[-1],
             (p.returncode, p.stdout.strip()), (0, "fresh ok"))


def check(argv):
    if argv:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    c = Checks()
    loader = installed_module("fp8a_recipe")
    with open(os.path.join(CAPTURE_SRC, "fp8a_recipe.py"), encoding="utf-8") as f:
        ast.parse(f.read(), feature_version=(3, 8))  # requires-python >= 3.8 (syntax only)
    c.true("no TE imported by the loader", loader.TE_RECIPE_MODULE not in sys.modules)
    te = _without_env(lambda: te_recipe_module())
    te_fp32 = _without_env(lambda: te_recipe_module(env={FP32: "1"}, name="te_recipe_fp32_scales"))
    c.eq("TE copies", (te.Float8BlockScaling.fp8_quant_fwd_inp.power_2_scale,
                       te_fp32.Float8BlockScaling.fp8_quant_fwd_inp.power_2_scale), (True, False))
    check_goldens(c, loader, te, te_fp32)
    check_block_env(c, loader, te, te_fp32)
    check_module_plan(c, loader, te)
    check_errors(c, loader, te, te_fp32)
    check_fresh(c)
    return "fp8a_recipe from %s: %d checks (%d goldens, the module plan sample, error cases, a fresh import)" % (
        os.path.dirname(loader.__file__), c.n, len(GOLDENS))


if __name__ == "__main__":
    sys.exit(main(check))
