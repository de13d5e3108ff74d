"""fp8a_recipe: fp8-advisor's recipe.json as Transformer Engine's recipe object and per-module plan.

TE has no JSON form of its recipes (only ``repr()``); this module is that form, one call::

    import fp8a_recipe
    advice = fp8a_recipe.load("report/recipe.json")   # imports transformer_engine.common.recipe
    import transformer_engine.pytorch as te
    with te.autocast(enabled=advice.recipe is not None, recipe=advice.recipe):
        loss = model(batch)
    advice.recipe_for("module.decoder.layers.3.mlp.linear_fc2")   # that module's recipe, None = BF16
    advice.bf16_gemms()                                           # [(layer, "dgrad"), ...]

``load(path_or_dict, te_recipe=None) -> Advice``
  path_or_dict: a path to recipe.json (str or os.PathLike) or the parsed JSON object.
  te_recipe: TE's recipe module; default ``importlib.import_module("transformer_engine.common.recipe")``,
  imported only when the file holds a recipe (an all-BF16 file needs no TE; without TE installed,
  a file with a recipe raises the import's ImportError).
  Raises RecipeJsonError (a ValueError; one line: the file, the JSON pointer, what is wrong) for an
  unreadable or non-JSON file, schema_version != 1, a class other than DelayedScaling,
  Float8CurrentScaling, Float8BlockScaling, MXFP8BlockScaling, NVFP4BlockScaling, a field TE's class does not declare
  (TE would ignore it), a value of the wrong JSON type, fp8_format other than E4M3/HYBRID,
  margin < 0, amax_history_len < 1 (TE accepts both), use_f32_scales (it does not change TE's
  scales; NVTE_FP8_BLOCK_SCALING_FP32_SCALES does), an env name TE's recipe module does not read,
  an env that cannot take effect (below), a value TE rejects or does not read back unchanged
  (TE coerces silently, e.g. "16" -> 16).

``Advice``
  .recipe        TE recipe object for the whole model; None: no FP8 candidate, run everything in BF16.
  .layers        dict captured layer name -> LayerPlan, in the file's order.
  .module_recipes  dict captured layer name -> TE recipe object or None (BF16), from the optional
                 "module_plan"; empty when the file has none.
  .recipe_for(fqn)  the module plan's recipe for a training script's module name: the entry whose
                 captured name is a dot-boundary suffix of fqn ("layers.3.mlp.linear_fc2" matches
                 "model.decoder.layers.3.mlp.linear_fc2", not "...layers.13.mlp.linear_fc2"), the
                 longest such; .recipe when no entry matches. The per-GEMM choices of .layers are
                 not in it (a TE module has one recipe): see bf16_gemms().
  .bf16_layers() names of the layers whose precision is "bf16".
  .bf16_gemms()  [(layer, gemm)] of every GEMM ("fprop", "dgrad", "wgrad") the plan keeps in BF16.
  .doc           the parsed recipe.json.

``LayerPlan``: precision ("fp8", "bf16" or "mixed"), fp8_safe (bool), incomplete (bool: some captured
step lacks one of the layer's operands), gemms (dict "fprop"/"dgrad"/"wgrad" -> "fp8" or "bf16"), reasons
(list of str).

Environment: a recipe's "env" (e.g. {"NVTE_FP8_BLOCK_SCALING_FP32_SCALES": "1"} or
{"NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES": "1"}) is what TE reads
only from the environment, once, when its recipe module is imported. A variable that already has
that value is fine. Otherwise, when load() imports TE's recipe module itself, it sets os.environ
first; when that module was already imported (or passed in), load() raises RecipeJsonError: set
VAR=VALUE before importing transformer_engine.

``build_recipe(obj, te_recipe, where="/recipe", source="recipe.json")``: one recipe object (the
"recipe" value) to TE's object, with the checks above; its "env" is not applied nor compared with
os.environ, only its names checked and, where TE's classes show it (FP32 block scales, power-of-two
current scales), that
te_recipe was imported with it.

Python >= 3.8, standard library only.
"""

import dataclasses
import importlib
import json
import os
import re
import sys

__all__ = ["load", "build_recipe", "Advice", "LayerPlan", "RecipeJsonError"]

TE_RECIPE_MODULE = "transformer_engine.common.recipe"
CLASSES = ("DelayedScaling", "Float8CurrentScaling", "Float8BlockScaling", "MXFP8BlockScaling", "NVFP4BlockScaling")
FORMATS = ("E4M3", "HYBRID")  # no pure E5M2: TE asserts for most recipes, the advisor never emits it
MM_FIELDS = ("use_split_accumulator",)
GEMMS = ("fprop", "dgrad", "wgrad")
LAYER_PRECISIONS = ("fp8", "bf16", "mixed")
GEMM_PRECISIONS = ("fp8", "bf16")
SCHEMA_VERSION = 1


class RecipeJsonError(ValueError):
    """recipe.json cannot become TE's recipe as written; the message is one line."""


@dataclasses.dataclass(frozen=True)
class LayerPlan:
    precision: str
    fp8_safe: bool
    incomplete: bool
    gemms: dict
    reasons: list


class Advice:
    """What load() returns; see the module docstring. The recipes are TE's objects, the rest
    plain Python values read from the file."""

    def __init__(self, doc, recipe, layers, module_recipes):
        self.doc = doc
        self.recipe = recipe
        self.layers = layers
        self.module_recipes = module_recipes

    def bf16_layers(self):
        return [name for name, plan in self.layers.items() if plan.precision == "bf16"]

    def bf16_gemms(self):
        return [(name, g) for name, plan in self.layers.items() for g in GEMMS
                if plan.gemms[g] == "bf16"]

    def recipe_for(self, module_name):
        best = None
        for layer in self.module_recipes:
            if module_name == layer or module_name.endswith("." + layer):
                if best is None or len(layer) > len(best):
                    best = layer
        return self.recipe if best is None else self.module_recipes[best]

    def __repr__(self):
        return "Advice(recipe=%s, %d layers, %d module recipes)" % (
            " ".join(repr(self.recipe).split()), len(self.layers), len(self.module_recipes))


class _Where:
    """Names the file in error messages."""

    def __init__(self, source):
        self.source = source

    def fail(self, pointer, message):
        raise RecipeJsonError("%s: at %s: %s" % (self.source, pointer or "/", message))


def _type_name(value):
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _expect(w, pointer, value, types, what):
    if not isinstance(value, types):
        w.fail(pointer, "%r: expected %s, not %s" % (value, what, _type_name(value)))
    return value


def _default(f):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _convert(w, te, pointer, what, key, value, default):
    """The JSON value as the Python value TE's constructor takes, with its type checked."""
    if isinstance(default, te.Format) or key == "fp8_format":
        if value not in FORMATS:
            w.fail(pointer, "%s = %r: expected one of %s" % (what, value, ", ".join(FORMATS)))
        return te.Format[value]
    if isinstance(default, te.MMParams):
        if not isinstance(value, dict) or set(value) - set(MM_FIELDS):
            w.fail(pointer, "%s = %r: expected {\"use_split_accumulator\": bool}" % (what, value))
        for k, v in value.items():
            if not isinstance(v, bool):
                w.fail("%s/%s" % (pointer, k), "%s.%s = %r: expected a boolean" % (what, k, v))
        return te.MMParams(**value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            w.fail(pointer, "%s = %r: expected a boolean" % (what, value))
        return value
    if isinstance(default, int):
        if not isinstance(value, int) or isinstance(value, bool):
            w.fail(pointer, "%s = %r: expected an integer" % (what, value))
        return value
    if isinstance(default, str) or default is None:
        if value is not None and not isinstance(value, str):
            w.fail(pointer, "%s = %r: expected a string or null" % (what, value))
        return value
    w.fail(pointer, "%s: a field of type %s cannot come from JSON" % (what, type(default).__name__))
    return None


def _te_env_names(te):
    """The NVTE_* variables TE's recipe module reads (named in its source)."""
    with open(te.__file__, encoding="utf-8") as f:
        return set(re.findall(r"NVTE_[A-Z0-9_]+", f.read()))


# What an import-time variable does to TE's classes, where the runtime reads that and not the
# field: var -> (class, attribute, value it has when var has that value). Float8BlockScaling's
# quantizers read fp8_quant_*.power_2_scale, set once at import (TE common/recipe/__init__.py;
# read by pytorch/quantization.py Float8BlockScalingRecipeState.make_quantizers).
_IMPORT_EFFECTS = {
    "NVTE_FP8_BLOCK_SCALING_FP32_SCALES":
        ("Float8BlockScaling", "fp8_quant_fwd_inp.power_2_scale", lambda v: v != "1"),
    # TE's Linear modules overwrite the quantizers' choice with these QParams, whatever
    # use_power_2_scales says (module/linear.py _customize_quantizers_float8_current_scaling).
    "NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES":
        ("Float8CurrentScaling", "fp8_quant_fwd_inp.power_2_scale", lambda v: v == "1"),
    # NVFP4BlockScaling's switches: fields whose defaults TE reads from these at import, so that
    # Megatron's NVFP4BlockScaling(), which passes none of them, takes them too.
    "NVTE_NVFP4_DISABLE_RHT": ("NVFP4BlockScaling", "disable_rht", lambda v: v == "1"),
    "NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING":
        ("NVFP4BlockScaling", "disable_stochastic_rounding", lambda v: v == "1"),
    "NVTE_NVFP4_DISABLE_2D_QUANTIZATION": ("NVFP4BlockScaling", "disable_2d_quantization", lambda v: v == "1"),
}


def _attr(obj, dotted):
    for name in dotted.split("."):
        obj = getattr(obj, name)
    return obj


def _env_of(w, pointer, obj):
    """A recipe object's "env", its JSON types checked: {} when absent."""
    env = obj.get("env", {})
    if not isinstance(env, dict):
        w.fail(pointer + "/env", "env = %r: expected an object" % (env,))
    for k, v in env.items():
        if not isinstance(v, str):
            w.fail("%s/env/%s" % (pointer, k), "env %s = %r: expected a string" % (k, v))
    return env


def _build(w, obj, te, pointer):
    if not isinstance(obj, dict):
        w.fail(pointer, "%r: expected a recipe object, not %s" % (obj, _type_name(obj)))
    cls_name = obj.get("class")
    if cls_name not in CLASSES:
        w.fail(pointer + "/class", "class %r: expected one of %s" % (cls_name, ", ".join(CLASSES)))
    cls = getattr(te, cls_name)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    te_env = _te_env_names(te)
    for k, v in _env_of(w, pointer, obj).items():
        if k not in te_env:
            w.fail("%s/env/%s" % (pointer, k), "env %s: not read by TE's recipe module (it reads %s)"
                   % (k, ", ".join(sorted(te_env))))
        effect = _IMPORT_EFFECTS.get(k)
        if effect and effect[0] == cls_name and _attr(cls, effect[1]) != effect[2](v):
            w.fail("%s/env/%s" % (pointer, k), "TE's recipe module was imported without %s=%s "
                   "(%s.%s is %r): set %s=%s before importing transformer_engine"
                   % (k, v, cls_name, effect[1], _attr(cls, effect[1]), k, v))
    kwargs = {}
    for key, value in obj.items():
        if key in ("class", "env"):
            continue
        at = "%s/%s" % (pointer, key)
        if key not in fields:
            w.fail(at, "unknown key %r for %s (TE would ignore it); fields: %s"
                   % (key, cls_name, ", ".join(fields)))
        kwargs[key] = _convert(w, te, at, "%s.%s" % (cls_name, key), key, value, _default(fields[key]))
    if kwargs.get("margin", 0) < 0:
        w.fail(pointer + "/margin", "%s.margin = %r: must be >= 0" % (cls_name, kwargs["margin"]))
    if "amax_history_len" in kwargs and kwargs["amax_history_len"] < 1:
        w.fail(pointer + "/amax_history_len", "%s.amax_history_len = %r: must be >= 1"
               % (cls_name, kwargs["amax_history_len"]))
    if "use_f32_scales" in kwargs:
        w.fail(pointer + "/use_f32_scales",
               "%s.use_f32_scales = %s does not change TE's scales; FP32 block scales need env "
               "NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1 (set before importing transformer_engine)"
               % (cls_name, json.dumps(obj["use_f32_scales"])))
    if cls_name == "Float8CurrentScaling" and "use_power_2_scales" in kwargs and \
            kwargs["use_power_2_scales"] != cls.fp8_quant_fwd_inp.power_2_scale:
        w.fail(pointer + "/use_power_2_scales",
               "%s.use_power_2_scales = %s does not reach TE's modules (they use fp8_quant_*.power_2_scale, "
               "%s here); power-of-two scales need env NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES=1 (set before "
               "importing transformer_engine)" % (cls_name, json.dumps(obj["use_power_2_scales"]),
                                                  cls.fp8_quant_fwd_inp.power_2_scale))
    try:
        made = cls(**kwargs)  # TE's own validation (pydantic's type checks, its asserts)
    except (AssertionError, ValueError, TypeError) as e:
        w.fail(pointer, "TE's %s rejects it: %s: %s" % (cls_name, type(e).__name__, " ".join(str(e).split())))
    for key, value in kwargs.items():
        if getattr(made, key) != value:
            w.fail("%s/%s" % (pointer, key), "%s.%s = %r reads back as %r"
                   % (cls_name, key, value, getattr(made, key)))
    return made


def build_recipe(obj, te_recipe, where="/recipe", source="recipe.json"):
    """One recipe object (recipe.json's "recipe" value, a dict) -> TE's recipe object.

    te_recipe: TE's recipe module (required here). where: the object's JSON pointer and source:
    the file, both for error messages. The object's "env" is checked (names TE reads, string
    values) but neither applied nor compared with os.environ; load() does that."""
    return _build(_Where(source), obj, te_recipe, where)


def _read(path_or_dict):
    if isinstance(path_or_dict, dict):
        return _Where("recipe.json (dict)"), path_or_dict
    source = os.fspath(path_or_dict)
    w = _Where(source)
    try:
        with open(source, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        w.fail("/", "cannot read it: %s" % (e.strerror or e))
    except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
        w.fail("/", "not JSON: %s" % e)
    if not isinstance(doc, dict):
        w.fail("/", "expected an object, not %s" % _type_name(doc))
    return w, doc


def _recipe_objects(w, doc):
    """[(JSON pointer, recipe object)] of every non-null recipe in the file, and the module plan's
    entries as [(pointer, layer, precision, recipe object or None)] (None: no module plan)."""
    recipes = []
    if "recipe" not in doc:
        w.fail("/recipe", "missing (null when no FP8 candidate was chosen)")
    if doc["recipe"] is not None:
        recipes.append(("/recipe", doc["recipe"]))
    plan = doc.get("module_plan")
    if plan is None:
        return recipes, None
    _expect(w, "/module_plan", plan, dict, "an object or null")
    modules = _expect(w, "/module_plan/modules", plan.get("modules"), list, "an array")
    entries = []
    seen = set()
    for i, m in enumerate(modules):
        at = "/module_plan/modules/%d" % i
        _expect(w, at, m, dict, "an object")
        layer = _expect(w, at + "/layer", m.get("layer"), str, "a string")
        if not layer:
            w.fail(at + "/layer", "empty layer name")
        if layer in seen:
            w.fail(at + "/layer", "layer %r planned twice" % layer)
        seen.add(layer)
        precision = m.get("precision")
        if precision not in GEMM_PRECISIONS:
            w.fail(at + "/precision", "%r: expected one of %s" % (precision, ", ".join(GEMM_PRECISIONS)))
        if "recipe" not in m:
            w.fail(at + "/recipe", "missing (null for a BF16 module)")
        obj = m["recipe"]
        if precision == "bf16" and obj is not None:
            w.fail(at + "/recipe", "a recipe for a module planned bf16 (expected null)")
        if precision == "fp8" and obj is None:
            w.fail(at + "/recipe", "null for a module planned fp8 (expected a recipe object)")
        if obj is not None:
            recipes.append((at + "/recipe", obj))
        entries.append((at + "/recipe", layer, precision, obj))
    return recipes, entries


def _wanted_env(w, recipes):
    """The union of the recipes' "env": {var: (value, pointer)}; one value per variable."""
    env = {}
    for pointer, obj in recipes:
        if not isinstance(obj, dict):
            continue  # _build says so
        for k, v in _env_of(w, pointer, obj).items():
            if k in env and env[k][0] != v:
                w.fail("%s/env/%s" % (pointer, k), "env %s = %r, but %s/env/%s = %r: TE reads one value "
                       "per process" % (k, v, env[k][1], k, env[k][0]))
            env.setdefault(k, (v, pointer))
    return env


def _te_module(w, te_recipe, env):
    """TE's recipe module, imported with env in effect, or a RecipeJsonError saying what to set."""
    differ = {k: vp for k, vp in env.items() if os.environ.get(k) != vp[0]}
    if te_recipe is None and TE_RECIPE_MODULE not in sys.modules:
        before = {k: os.environ.get(k) for k in differ}
        os.environ.update({k: v for k, (v, _) in differ.items()})
        te_recipe = importlib.import_module(TE_RECIPE_MODULE)
        unread = sorted(set(differ) - _te_env_names(te_recipe))
        for k in unread:  # _build names it; leave no variable TE does not read behind
            if before[k] is None:
                del os.environ[k]
            else:
                os.environ[k] = before[k]
        return te_recipe
    if te_recipe is None:
        te_recipe = sys.modules[TE_RECIPE_MODULE]
    te_env = _te_env_names(te_recipe)
    for k, (v, pointer) in sorted(differ.items()):
        if k in te_env:  # an unread name is _build's error
            w.fail("%s/env/%s" % (pointer, k), "TE reads %s when transformer_engine is imported, and it "
                   "was imported with %s: set %s=%s before importing transformer_engine"
                   % (k, "%s=%s" % (k, os.environ[k]) if k in os.environ else "it unset", k, v))
    return te_recipe


def _layers(w, doc):
    layers = _expect(w, "/layers", doc.get("layers"), list, "an array")
    out = {}
    for i, l in enumerate(layers):
        at = "/layers/%d" % i
        _expect(w, at, l, dict, "an object")
        name = _expect(w, at + "/layer", l.get("layer"), str, "a string")
        if name in out:
            w.fail(at + "/layer", "layer %r listed twice" % name)
        precision = l.get("precision")
        if precision not in LAYER_PRECISIONS:
            w.fail(at + "/precision", "%r: expected one of %s" % (precision, ", ".join(LAYER_PRECISIONS)))
        fp8_safe = _expect(w, at + "/fp8_safe", l.get("fp8_safe"), bool, "a boolean")
        incomplete = _expect(w, at + "/incomplete", l.get("incomplete", False), bool, "a boolean")
        gemms_json = _expect(w, at + "/gemms", l.get("gemms"), dict, "an object")
        gemms = {}
        for g in GEMMS:
            d = _expect(w, "%s/gemms/%s" % (at, g), gemms_json.get(g), dict, "an object")
            p = d.get("precision")
            if p not in GEMM_PRECISIONS:
                w.fail("%s/gemms/%s/precision" % (at, g),
                       "%r: expected one of %s" % (p, ", ".join(GEMM_PRECISIONS)))
            gemms[g] = p
        reasons = _expect(w, at + "/reasons", l.get("reasons", []), list, "an array")
        for j, r in enumerate(reasons):
            _expect(w, "%s/reasons/%d" % (at, j), r, str, "a string")
        out[name] = LayerPlan(precision, fp8_safe, incomplete, gemms, list(reasons))
    return out


def load(path_or_dict, te_recipe=None):
    """recipe.json -> Advice; see the module docstring."""
    w, doc = _read(path_or_dict)
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        w.fail("/schema_version", "%s: expected %d (this loader reads recipe.json schema_version %d)"
               % (json.dumps(version), SCHEMA_VERSION, SCHEMA_VERSION))
    recipes, entries = _recipe_objects(w, doc)
    layers = _layers(w, doc)
    te = _te_module(w, te_recipe, _wanted_env(w, recipes)) if recipes else te_recipe
    recipe = _build(w, doc["recipe"], te, "/recipe") if doc["recipe"] is not None else None
    module_recipes = {}
    for pointer, layer, _, obj in entries or []:
        module_recipes[layer] = None if obj is None else _build(w, obj, te, pointer)
    return Advice(doc, recipe, layers, module_recipes)
