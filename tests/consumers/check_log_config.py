#!/usr/bin/env python3
"""check_log_config.py FILE RECIPE SM: the YAML `fp8-advisor log-config` writes loads with
nvdlfw_inspect and TE's own debug features (the TE sources FP8A_TE_SRC names, else the newest),
every statistic it asks for is one TE's feature accepts for a run training RECIPE (TE's name:
fp8_current_scaling, fp8_delayed_scaling, fp8_block_scaling, mxfp8, nvfp4; "" for BF16) on a GPU
of compute capability SM (90 for sm_90), by that feature's own check (LogFp8TensorStats
check_if_stat_is_supported, with torch.cuda.get_device_capability answering SM; TE 2.4-2.6: its
supported list; LogTensorStats and LogNvfp4TensorStats likewise), and TE's debug API enables the
logging of X, W and dY at the file's steps only (freq, start_step, end_step), checked on a layer
name. Prints one line: "OK: ..." or "FAIL: ..."."""
import os
import sys
import tempfile
import warnings

import yaml

from _common import CheckFailed, main, require_file
from _te_debug import te_debug_features

LAYER = "model.module.decoder.layers.3.mlp.linear_fc1"
TENSORS = ("activation", "weight", "gradient")


def stat_accepted(feature_cls, feature, stat, recipe):
    """TE's own answer: raises or returns False for a statistic the feature does not take."""
    obj = feature_cls.__new__(feature_cls) if isinstance(feature_cls, type) else feature_cls
    if feature == "LogFp8TensorStats":
        if hasattr(obj, "check_if_stat_is_supported"):
            return obj.check_if_stat_is_supported(stat, recipe, high_precision_tensor_provided=True)
        return stat in obj._get_supported_stats_list()
    if feature == "LogNvfp4TensorStats":
        return obj.check_if_stat_is_supported(stat)
    if hasattr(obj, "_is_supported_stat"):
        return obj._is_supported_stat(stat)
    return stat in obj._get_supported_stats_list()


def logged_steps(params, last):
    freq, start, end = params.get("freq", 1), params.get("start_step", 0), params.get("end_step", -1)
    # TE's debug features log the steps that are multiples of freq within [start_step, end_step]
    # (debug/features/utils next_enabled_iter; nvdlfw_inspect's enable_logging_at_current_step).
    return {i for i in range(last) if i >= start and (end < 0 or i <= end) and i % freq == 0}


def check(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    path, recipe, sm = argv[0], argv[1], int(argv[2])
    require_file(path)
    with open(path, encoding="utf-8") as f:
        raw = yaml.safe_load(f)
    if not isinstance(raw, dict) or len(raw) != 1:
        raise CheckFailed("%s: expected one section" % path)
    section = next(iter(raw.values()))
    features_cfg = section.get("transformer_engine") or {}
    warnings.filterwarnings("ignore")
    import torch
    torch.cuda.get_device_capability = lambda *a, **k: (sm // 10, sm % 10)
    features = te_debug_features()
    import nvdlfw_inspect.api as debug_api
    from nvdlfw_inspect.registry import Registry
    checked = 0
    with tempfile.TemporaryDirectory() as d:
        debug_api.initialize(config_file=path, feature_dirs=[features], log_dir=os.path.join(d, "log"))
        try:
            registered = Registry.data["transformer_engine"].features
            for feature, params in features_cfg.items():
                if feature not in registered:
                    raise CheckFailed("%s: TE has no debug feature %s" % (path, feature))
                for stat in params["stats"]:
                    try:
                        ok = stat_accepted(registered[feature], feature, stat, recipe)
                    except (ValueError, AssertionError) as e:
                        raise CheckFailed("%s %s: TE refuses it: %s" % (feature, stat, e))
                    if not ok:
                        raise CheckFailed("%s %s: not among TE's statistics" % (feature, stat))
                    checked += 1
            want = set()
            for params in features_cfg.values():
                want |= logged_steps(params, 60)
            for tensor in TENSORS:
                for it in range(60):
                    r = debug_api.transformer_engine.inspect_tensor_enabled(
                        layer_name=LAYER, tensor_name=tensor, iteration=it)
                    got = bool(r[0] if isinstance(r, tuple) else r)  # TE 2.4: a bool alone
                    if got != (it in want):
                        raise CheckFailed("%s at iteration %d: TE logs %s, expected %s" % (tensor, it, got, it in want))
        finally:
            debug_api.end_debug()
    return "%s: %d features, %d statistics accepted by TE's own checks (%s, sm_%d); X, W, dY logged at %d of 60 steps" % (
        os.path.basename(path), len(features_cfg), checked, recipe or "bf16", sm, len(want))


if __name__ == "__main__":
    sys.exit(main(check))
