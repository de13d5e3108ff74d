#!/usr/bin/env python3
"""check_plan_agreement.py OUT [OUT ...]: what every file of a `run` trains equals, GEMM by GEMM,
what recipe.json says it trains (issue 55: the answer is what the files train).

recipe.json's "trained" holds the plans: [0] per GEMM (te_snippet.py with nvdlfw_inspect.yaml),
[1] per module (Megatron's megatron_args.txt, megatron_bridge.yaml and te_precision_config.yaml;
torchao.json where it trains the same), [2] torchao.json where it trains another plan. Each file is read back with its consumer's own matching:
  - te_snippet.py: FP8 autocast on exactly when recipe.json has a recipe;
  - nvdlfw_inspect.yaml: nvdlfw_inspect's ConfigManager gives each layer (by the name recipe.json
    says nvdlfw knows it by, under Megatron's DDP/Float16Module prefix) its config; TE's
    DisableFP8GEMM / DisableQuantizationGEMM send its `gemms` to BF16, DisableFP8Layer /
    DisableQuantizationLayer the whole layer;
  - te_precision_config.yaml: Megatron-Core's get_quant_config_or_none resolves each module path;
    a config with an empty training_recipe is BF16; without the file, every module runs the
    recipe of megatron_args.txt; --first-last-layers-bf16 with its counts keeps those layers BF16;
    Megatron's MoE router and LM head (without --fp8-output-proj) are not TE modules: BF16;
  - torchao.json: recipe_name set exactly when a plan lists it; a module its filter_fqns selects
    (the FQN, or one ending in "." + it) stays high precision, and every wgrad under
    rowwise_with_gw_hp.
Each GEMM's precision from the files must equal recipe.json's; the per-GEMM plan must equal
recipe.json's layers unless its `differs` says how it does (layers one name selects together); recipe.json must validate against reports/consumers/recipe.schema.json. One FAIL line names the first disagreement."""
import json
import os
import re
import sys
import tempfile
import warnings

import yaml

from _common import CheckFailed, main, read_json
import check_megatron
import check_schema
import check_nvdlfw

GEMMS = ("fprop", "dgrad", "wgrad")
NVDLFW_PREFIX = "model.module.module."  # infer_and_assign_layer_names on DDP(Float16Module(GPTModel))


def _spellings(layer):
    """The names a consumer may know the layer by: recipe.json's, and for a TE dump's name (the
    debug API's with every '.' made '_', which the configs match as '.' or '_') the same with
    every '_' a '.' too."""
    name = layer["name"]
    dump = layer["layer"].startswith("model_") and "." not in layer["layer"]
    return [name, name.replace("_", ".")] if dump and "_" in name else [name]


def _expect(got, want, where):
    if got != want:
        raise CheckFailed("%s: the file trains %s, recipe.json says %s" % (where, got, want))


def _per_gemm(out, doc, plan):
    fp8 = doc["recipe"] is not None
    with open(os.path.join(out, "te_snippet.py"), encoding="utf-8") as f:
        snippet = f.read()
    autocast = re.search(r"(te\.autocast|te\.fp8_autocast)\(enabled=True", snippet) is not None
    if autocast != fp8:
        raise CheckFailed("te_snippet.py: FP8 autocast %s, recipe.json recipe %s" % (
            "on" if autocast else "off", "set" if fp8 else "null"))
    disabled = {}
    nvdlfw = os.path.join(out, "nvdlfw_inspect.yaml")
    if fp8 and os.path.isfile(nvdlfw):
        warnings.filterwarnings("ignore")
        import nvdlfw_inspect.api as debug_api
        from nvdlfw_inspect.config_manager import ConfigManager
        with tempfile.TemporaryDirectory() as d:
            features = os.path.join(d, "features")
            os.mkdir(features)
            check_nvdlfw.write_stub_features(features, check_nvdlfw.te_feature_names())
            debug_api.initialize(config_file=nvdlfw, feature_dirs=[features], log_dir=os.path.join(d, "log"))
            try:
                for layer in plan["layers"]:
                    offs = []
                    for name in _spellings(layer):
                        cfg = ConfigManager.get_config_for_layer(NVDLFW_PREFIX + name) or {}
                        off = set()
                        for feature, params in (cfg.get("transformer_engine") or {}).items():
                            params = params or {}
                            if not params.get("enabled", False):
                                continue
                            if feature in ("DisableFP8Layer", "DisableQuantizationLayer"):
                                off |= set(GEMMS)
                            elif feature in ("DisableFP8GEMM", "DisableQuantizationGEMM"):
                                g = params.get("gemms", [])
                                off |= set(g if isinstance(g, list) else [g])
                        offs.append(off)
                    if any(o != offs[0] for o in offs):
                        raise CheckFailed("nvdlfw_inspect.yaml: %s's spellings %s get different GEMMs" % (
                            layer["layer"], _spellings(layer)))
                    disabled[layer["layer"]] = offs[0]
            finally:
                debug_api.end_debug()
    layers = {l["layer"]: l for l in doc["layers"]}
    for layer in plan["layers"]:
        off = disabled.get(layer["layer"], set())
        for g in GEMMS:
            got = "bf16" if not fp8 or g in off else "fp8"
            where = "per GEMM: %s %s" % (layer["layer"], g)
            _expect(got, layer[g], where)
            if not plan["differs"]:  # the recommendation's plan itself: its layers say the same
                _expect(layers[layer["layer"]]["gemms"][g]["precision"], layer[g], where + " (recipe.json layers)")
    return len(plan["layers"])


def _megatron_args(out):
    with open(os.path.join(out, "megatron_args.txt"), encoding="utf-8") as f:
        args = [l.strip() for l in f if l.strip() and not l.lstrip().startswith("#")]
    flags = {}
    for a in args:
        k, _, v = a.partition(" ")
        flags[k] = v
    return flags


def _non_te(name, flags):
    """Megatron runs these outside TE: the MoE router always, the LM head without fp8_output_proj."""
    if name == "mlp.router" or name.endswith(".mlp.router"):
        return True
    return name == "output_layer" and "--fp8-output-proj" not in flags


def _per_module(out, doc, plan):
    flags = _megatron_args(out)
    fp8 = "--fp8-recipe" in flags or "--fp4-recipe" in flags
    if fp8 != (doc["recipe"] is not None):
        raise CheckFailed("megatron_args.txt: FP8 %s, recipe.json recipe %s" % (
            "on" if fp8 else "off", "set" if doc["recipe"] is not None else "null"))
    bf16_configs, resolve = set(), None
    precision = os.path.join(out, "te_precision_config.yaml")
    if fp8 and os.path.isfile(precision):
        utils, _, _, _ = check_megatron._megatron()
        recipe = utils.load_quantization_recipe(precision)
        with open(precision, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
        for key, cfg in (raw.get("configs") or {}).items():
            if not (cfg or {}).get("training_recipe"):
                bf16_configs.add(key)
        resolve = lambda path: utils.get_quant_config_or_none(path, recipe)  # noqa: E731
    at_start = int(flags.get("--num-layers-at-start-in-bf16", 0)) if "--first-last-layers-bf16" in flags else 0
    at_end = int(flags.get("--num-layers-at-end-in-bf16", 0)) if "--first-last-layers-bf16" in flags else 0
    indices = [int(m.group(1)) for l in plan["layers"] for m in [re.search(r"(?:^|\.)layers\.(\d+)\.", l["name"])] if m]
    last = max(indices) if indices else -1
    for layer in plan["layers"]:
        name = layer["name"]
        m = re.search(r"(?:^|\.)layers\.(\d+)\.", name)
        end_bf16 = m is not None and (int(m.group(1)) < at_start or (at_end > 0 and int(m.group(1)) > last - at_end))
        low = fp8 and not _non_te(name, flags) and not end_bf16
        if low and resolve is not None:
            lows = []
            for spelling in _spellings(layer):
                q = resolve(spelling)
                lows.append(q is None or q.config_key not in bf16_configs)
            if any(x != lows[0] for x in lows):
                raise CheckFailed("te_precision_config.yaml: %s's spellings %s resolve differently" % (
                    layer["layer"], _spellings(layer)))
            low = lows[0]
        for g in GEMMS:
            _expect("fp8" if low else "bf16", layer[g], "per module (Megatron): %s %s" % (layer["layer"], g))
    return len(plan["layers"])


def _torchao(out, doc, trained):
    """torchao.json against the plan that lists it (one at most)."""
    torchao = read_json(os.path.join(out, "torchao.json"))
    flags = _megatron_args(out)
    plans = [t for t in trained if "torchao.json" in t["files"]]
    if len(plans) > 1:
        raise CheckFailed("torchao.json listed by %d plans" % len(plans))
    if (torchao.get("recipe_name") is not None) != (bool(plans) and doc["recipe"] is not None):
        raise CheckFailed("torchao.json: recipe_name %r, but recipe.json %s it" % (
            torchao.get("recipe_name"), "lists" if plans else "does not list"))
    if torchao.get("recipe_name") is None:
        return
    kept = torchao.get("filter_fqns", [])
    gw_hp = torchao["recipe_name"].endswith("_with_gw_hp")  # every grad-weight GEMM in high precision
    for layer in plans[0]["layers"]:
        fqn = layer["layer"]
        high = _non_te(layer["name"], flags) or any(fqn == f or fqn.endswith("." + f) for f in kept)
        for g in GEMMS:
            got = "bf16" if high or (gw_hp and g == "wgrad") else "fp8"
            _expect(got, layer[g], "per module (torchao.json): %s %s" % (fqn, g))


def check(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    said = []
    schema = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reports", "consumers",
                          "recipe.schema.json")
    for out in argv:
        check_schema.check([schema, os.path.join(out, "recipe.json")])  # every recipe.json valid too
        doc = read_json(os.path.join(out, "recipe.json"))
        trained = doc.get("trained")
        if not trained:  # no candidate chosen: nothing may train FP8
            if doc["recipe"] is not None:
                raise CheckFailed("%s: a recipe and no trained plan" % out)
            flags = _megatron_args(out)
            if "--fp8-recipe" in flags or "--fp4-recipe" in flags:
                raise CheckFailed("%s: megatron_args.txt turns FP8 on with nothing chosen" % out)
            said.append("%s: nothing chosen, every file BF16" % os.path.basename(out))
            continue
        kinds = [t["granularity"] for t in trained]
        if kinds[:2] != ["gemm", "module"] or any(k != "module" for k in kinds[2:]):
            raise CheckFailed("%s: trained plans %r" % (out, kinds))
        if "megatron_args.txt" not in trained[1]["files"]:
            raise CheckFailed("%s: the per-module plan is not Megatron's" % out)
        try:
            n = _per_gemm(out, doc, trained[0])
            _per_module(out, doc, trained[1])
            _torchao(out, doc, trained)
        except CheckFailed as e:
            raise CheckFailed("%s: %s" % (os.path.basename(out), e))
        said.append("%s: %d layers x 3 GEMMs agree per GEMM and per module" % (os.path.basename(out), n))
    return "; ".join(said)


if __name__ == "__main__":
    sys.exit(main(check))
