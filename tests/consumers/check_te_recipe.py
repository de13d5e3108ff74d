#!/usr/bin/env python3
"""check_te_recipe.py FILE: the recipe of a recipe.json (its "recipe" object, or the whole file
when it has "class") builds Transformer Engine's own recipe object.

The object is {"class": one of DelayedScaling, Float8CurrentScaling, Float8BlockScaling,
MXFP8BlockScaling, then the class's constructor fields by TE's names ("fp8_format": "E4M3" or
"HYBRID"; MMParams fields as {"use_split_accumulator": bool}), and optionally "env": {NVTE_*
variable: string} for what TE reads only from the environment}. TE's pydantic dataclasses ignore
unknown keyword arguments and accept out-of-range values (consumers.md section 1.1), so before
building the object this checks, against the fields TE declares: no unknown key, the JSON type
of each value, margin >= 0, amax_history_len >= 1, no use_f32_scales (it does not change the
scales; NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1 does), env names that TE's recipe module reads.
After building, every given field must read back unchanged (no silent coercion)."""
import dataclasses
import os
import re
import sys

from _common import CheckFailed, main, read_json, te_recipe_module

CLASSES = ("DelayedScaling", "Float8CurrentScaling", "Float8BlockScaling", "MXFP8BlockScaling")
FORMATS = ("E4M3", "HYBRID")  # no pure E5M2: TE asserts for most recipes, the advisor never emits it
MM_FIELDS = ("use_split_accumulator",)


def _default(f):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _convert(te, cls_name, key, value, default):
    """The JSON value as the Python value TE's constructor takes, with its type checked."""
    what = "%s.%s" % (cls_name, key)
    if isinstance(default, te.Format) or key == "fp8_format":
        if value not in FORMATS:
            raise CheckFailed("%s = %r: expected one of %s" % (what, value, ", ".join(FORMATS)))
        return te.Format[value]
    if isinstance(default, te.MMParams):
        if not isinstance(value, dict) or set(value) - set(MM_FIELDS):
            raise CheckFailed("%s = %r: expected {\"use_split_accumulator\": bool}" % (what, value))
        for k, v in value.items():
            if not isinstance(v, bool):
                raise CheckFailed("%s.%s = %r: expected a boolean" % (what, k, v))
        return te.MMParams(**value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise CheckFailed("%s = %r: expected a boolean" % (what, value))
        return value
    if isinstance(default, int):
        if not isinstance(value, int) or isinstance(value, bool):
            raise CheckFailed("%s = %r: expected an integer" % (what, value))
        return value
    if isinstance(default, str) or default is None:
        if value is not None and not isinstance(value, str):
            raise CheckFailed("%s = %r: expected a string or null" % (what, value))
        return value
    raise CheckFailed("%s: a field of type %s cannot come from JSON" % (what, type(default).__name__))


def check(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    doc = read_json(argv[0])
    recipe = doc if isinstance(doc, dict) and "class" in doc else (doc or {}).get("recipe")
    if not isinstance(recipe, dict):
        raise CheckFailed("%s: no \"recipe\" object" % argv[0])
    te = te_recipe_module()
    cls_name = recipe.get("class")
    if cls_name not in CLASSES:
        raise CheckFailed("class %r: expected one of %s" % (cls_name, ", ".join(CLASSES)))
    cls = getattr(te, cls_name)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    env = recipe.get("env", {})
    te_env = set(re.findall(r"NVTE_[A-Z0-9_]+", open(te.__file__, encoding="utf-8").read()))
    if not isinstance(env, dict):
        raise CheckFailed("env = %r: expected an object" % (env,))
    for k, v in env.items():
        if k not in te_env:
            raise CheckFailed("env %s: not read by TE's recipe module (it reads %s)"
                              % (k, ", ".join(sorted(te_env))))
        if not isinstance(v, str):
            raise CheckFailed("env %s = %r: expected a string" % (k, v))
    kwargs = {}
    for key, value in recipe.items():
        if key in ("class", "env"):
            continue
        if key not in fields:
            raise CheckFailed("unknown key %r for %s (TE would ignore it); fields: %s"
                              % (key, cls_name, ", ".join(fields)))
        kwargs[key] = _convert(te, cls_name, key, value, _default(fields[key]))
    if kwargs.get("margin", 0) < 0:
        raise CheckFailed("%s.margin = %r: must be >= 0" % (cls_name, kwargs["margin"]))
    if "amax_history_len" in kwargs and kwargs["amax_history_len"] < 1:
        raise CheckFailed("%s.amax_history_len = %r: must be >= 1"
                          % (cls_name, kwargs["amax_history_len"]))
    if kwargs.get("use_f32_scales"):
        raise CheckFailed("%s.use_f32_scales = true does not change TE's scales; FP32 block scales "
                          "need env NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1" % cls_name)
    obj = cls(**kwargs)  # TE's own validation (type checks, asserts)
    for key, value in kwargs.items():
        if getattr(obj, key) != value:
            raise CheckFailed("%s.%s = %r reads back as %r" % (cls_name, key, value, getattr(obj, key)))
    return "%s builds %s" % (os.path.basename(argv[0]), " ".join(repr(obj).split()))


if __name__ == "__main__":
    sys.exit(main(check))
