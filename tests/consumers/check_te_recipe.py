#!/usr/bin/env python3
"""check_te_recipe.py FILE: the recipe of a recipe.json (its "recipe" object, or the whole file
when it has "class") builds Transformer Engine's own recipe object, through fp8a_recipe (the
loader of python/, as pip installed it in the venv) and TE's recipe module loaded by
path with the recipe's "env" set.

The object is {"class": one of DelayedScaling, Float8CurrentScaling, Float8BlockScaling,
MXFP8BlockScaling, NVFP4BlockScaling, then the class's constructor fields by TE's names ("fp8_format": "E4M3" or
"HYBRID"; MMParams fields as {"use_split_accumulator": bool}), and optionally "env": {NVTE_*
variable: string} for what TE reads only from the environment}. TE's pydantic dataclasses ignore
unknown keyword arguments and accept out-of-range values (TE transformer_engine/common/recipe/
__init__.py; pydantic's default extra="ignore"), so fp8a_recipe.build_recipe checks, against
the fields TE declares: no unknown key, the JSON type of each value, margin >= 0,
amax_history_len >= 1, no use_f32_scales (it does not change the scales;
NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1 does), env names that TE's recipe module reads.
After building, every given field must read back unchanged (no silent coercion)."""
import os
import sys

from _common import CheckFailed, installed_module, main, read_json, te_recipe_module


def check(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    doc = read_json(argv[0])
    flat = isinstance(doc, dict) and "class" in doc
    recipe = doc if flat else (doc or {}).get("recipe")
    if not isinstance(recipe, dict):
        raise CheckFailed("%s: no \"recipe\" object" % argv[0])
    env = recipe.get("env")
    te = te_recipe_module(env={k: v for k, v in env.items() if isinstance(v, str)}
                          if isinstance(env, dict) else None)
    loader = installed_module("fp8a_recipe")
    try:
        obj = loader.build_recipe(recipe, te, where="" if flat else "/recipe",
                                  source=os.path.basename(argv[0]))
    except loader.RecipeJsonError as e:
        raise CheckFailed(str(e))
    return "%s builds %s" % (os.path.basename(argv[0]), " ".join(repr(obj).split()))


if __name__ == "__main__":
    sys.exit(main(check))
