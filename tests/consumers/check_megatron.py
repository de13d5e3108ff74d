#!/usr/bin/env python3
"""check_megatron.py FILE [MODULE_PATH=CONFIG ...]: a te_precision_config.yaml loads with
Megatron-Core's own loader and every config parses with Megatron's own parser.

Runs, with Megatron-Core's code (megatron.core.quantization, megatron.core.extensions
.transformer_engine) and TE's real recipe classes (TE itself cannot import without its library,
so Megatron's `te` handle gets TE's recipe module and `fp8_model_init` returns its arguments):
load_quantization_recipe(FILE); TEQuantizationParams.parse_from_config for every config (unknown
recipe keys fail); Megatron's recipe mapping for the training and evaluation recipe (builds the
TE recipe object: an unknown recipe or format fails); get_quant_config_or_none for each
MODULE_PATH, whose resolved config must be CONFIG ("-" = no matcher, default precision).
Added, because Megatron is silent about them (Megatron-LM megatron/core/quantization/
quant_config.py: a matcher's enabled defaults to False): every matcher has `enabled: true` (one
without it is skipped), and names a config that exists (Megatron fails only when a module first
matches it)."""
import copy
import os
import sys
import warnings

import yaml

from _common import CheckFailed, main, require_file, te_recipe_module


def _megatron():
    warnings.filterwarnings("ignore")
    # FP8A_MEGATRON_SRC: another Megatron-Core release's sources, ahead of the venv's
    # (run_checks.py megatron_oldest: 0.16.1, the oldest with --te-precision-config-file).
    if os.environ.get("FP8A_MEGATRON_SRC"):
        sys.path.insert(0, os.environ["FP8A_MEGATRON_SRC"])
    te_recipe = te_recipe_module()
    from megatron.core.quantization import utils
    from megatron.core.quantization.quant_config import MatchContext, QuantizationConfig
    from megatron.core.extensions import transformer_engine as mte
    mte.te.common.recipe = te_recipe  # HAVE_TE is False there: `te` is a stand-in object
    mte.fp8_model_init = lambda **kw: kw
    return utils, MatchContext, QuantizationConfig, mte


def _te_recipe_of(mte, qrecipe):
    """The TE recipe object Megatron builds for a parsed quantization recipe (None: BF16)."""
    if hasattr(mte, "_get_fp8_model_init_for_quant_recipe"):
        return mte._get_fp8_model_init_for_quant_recipe(qrecipe)["recipe"]
    # Megatron-Core 0.16 builds it where the layer enters its autocast: enter one with FP8 on and
    # the layer's override set, and take the recipe the autocast is given.
    mte.FP8GlobalStateManager = type("FP8State", (), {"is_fp8_enabled": staticmethod(lambda: True)})
    mte.fp8_autocast = lambda **kw: kw
    mte.model_parallel_is_initialized = lambda: False
    q = copy.copy(qrecipe)
    q.override_quantized_autocast = True
    got = mte._get_fp8_autocast_for_quant_recipe(q)
    return got.get("fp8_recipe") if isinstance(got, dict) else None


def check(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    path, expects = argv[0], []
    for a in argv[1:]:
        module, sep, config = a.rpartition("=")
        if not sep or not module:
            print("expected MODULE_PATH=CONFIG, got %r" % a, file=sys.stderr)
            sys.exit(2)
        expects.append((module, config))
    require_file(path)
    with open(path, encoding="utf-8") as f:
        raw = yaml.safe_load(f)
    if not isinstance(raw, dict):
        raise CheckFailed("%s: not a YAML mapping" % path)
    utils, MatchContext, QuantizationConfig, mte = _megatron()
    recipe = utils.load_quantization_recipe(path)
    raw_matchers = raw.get("matchers") or {}
    for name, m in raw_matchers.items():
        if not isinstance(m, dict) or m.get("enabled") is not True:
            raise CheckFailed("matcher %r has no `enabled: true` (Megatron skips it silently)" % name)
        if m.get("config") not in recipe.configs:
            raise CheckFailed("matcher %r names config %r, not in configs (%s)"
                              % (name, m.get("config"), ", ".join(recipe.configs)))
    if not recipe.matchers:
        raise CheckFailed("%s: no matcher" % path)
    built = []
    for key, cfg in recipe.configs.items():
        params = mte.TEQuantizationParams.parse_from_config(
            QuantizationConfig(cfg, MatchContext(key, None), key))
        for mode, r in (("training", params.training_recipe), ("evaluation", params.evaluation_recipe)):
            if r is not None:
                te_recipe = _te_recipe_of(mte, r)
                built.append("%s[%s]=%s" % (key, mode, type(te_recipe).__name__ if te_recipe else "bf16"))
    for module, want in expects:
        q = utils.get_quant_config_or_none(module, recipe)
        got = q.config_key if q else "-"
        if got != want:
            raise CheckFailed("%s resolves to config %r, expected %r" % (module, got, want))
    from megatron.core import package_info
    return "%s: %d matchers, %s; %d module paths resolved as expected [Megatron-Core %s]" % (
        os.path.basename(path), len(recipe.matchers), ", ".join(built), len(expects), package_info.__version__)


if __name__ == "__main__":
    sys.exit(main(check))
