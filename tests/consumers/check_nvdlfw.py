#!/usr/bin/env python3
"""check_nvdlfw.py FILE [LAYER_NAME ...]: a debug YAML (nvdlfw_inspect.yaml) loads with
nvdlfw_inspect's own config parsing, and each LAYER_NAME gets its config from nvdlfw's
ConfigManager (this is where two sections selecting one layer fail).

TE's debug features cannot be imported without TE's torch extension, so nvdlfw's registry gets
stand-ins named after the features TE 2.20.2 registers (read with `ast` from TE's own
transformer_engine/debug/features/*.py): nvdlfw then checks the sections, `enabled`, `layers`
and each feature name exactly as in training. nvdlfw does not check feature parameters (TE reads
them at call time), so this checks those of the features fp8-advisor writes:
DisableQuantizationGEMM / LogFp8TensorStats / LogTensorStats `gemms` within fprop, dgrad, wgrad,
`tensors` within TE's tensor names, `stats` a non-empty list, `freq` an integer >= 1. A missing
FILE fails here (nvdlfw only warns)."""
import ast
import glob
import os
import sys
import tempfile
import warnings

import yaml

from _common import TE_SRC, CheckFailed, main, require_file

GEMMS = {"fprop", "dgrad", "wgrad"}
TENSORS = {"activation", "gradient", "weight", "output", "wgrad", "dgrad"}


def te_feature_names():
    names = []
    for path in sorted(glob.glob(os.path.join(TE_SRC, "transformer_engine", "debug", "features", "*.py"))):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "register_feature"
                    and any(k.arg == "namespace" and getattr(k.value, "value", None) == "transformer_engine"
                            for k in d.keywords) for d in node.decorator_list):
                names.append(node.name)
    if not names:
        raise CheckFailed("no TE debug feature found under %s (run scripts/consumers-env.sh)" % TE_SRC)
    return names


def write_stub_features(folder, names):
    body = ["from nvdlfw_inspect.base import BaseNamespaceAPI",
            "from nvdlfw_inspect.registry import Registry",
            '@Registry.register_namespace_api(namespace="transformer_engine")',
            "class _StubTEAPI(BaseNamespaceAPI):",
            "    def input_assertions_hook(self, api_name, **kw): pass",
            "    def routing_condition(self, api_name, config, layer_name, feature_obj, **kw): return False, None",
            "    def output_assertions_hook(self, api_name, ret, **kw): pass",
            "    def is_multiple_feature_invocation_allowed(self, api_name): return False"]
    for n in names:
        body += ['@Registry.register_feature(namespace="transformer_engine")', "class %s:" % n, "    pass"]
    with open(os.path.join(folder, "te_feature_stubs.py"), "w", encoding="utf-8") as f:
        f.write("\n".join(body) + "\n")


def _names(value, what, allowed):
    items = value if isinstance(value, list) else [value]
    for v in items:
        if v not in allowed:
            raise CheckFailed("%s %r: expected one of %s" % (what, v, ", ".join(sorted(allowed))))


def check_parameters(raw):
    for section, body in raw.items():
        te = (body or {}).get("transformer_engine") or {}
        for feature, params in te.items():
            where = "%s.transformer_engine.%s" % (section, feature)
            params = params or {}
            if "gemms" in params:
                _names(params["gemms"], where + ".gemms", GEMMS)
            for s in params.get("gemms_struct") or []:
                _names(s.get("gemm"), where + ".gemms_struct.gemm", GEMMS)
            if "tensors" in params:
                _names(params["tensors"], where + ".tensors", TENSORS)
            for s in params.get("tensors_struct") or []:
                _names(s.get("tensor"), where + ".tensors_struct.tensor", TENSORS)
                if feature.startswith("Log") and not (isinstance(s.get("stats"), list) and s["stats"]):
                    raise CheckFailed("%s.tensors_struct: stats must be a non-empty list" % where)
            if feature.startswith("Log") and "tensors" in params and not (
                    isinstance(params.get("stats"), list) and params["stats"]):
                raise CheckFailed("%s.stats must be a non-empty list" % where)
            freq = params.get("freq", 1)
            if not isinstance(freq, int) or isinstance(freq, bool) or freq < 1:
                raise CheckFailed("%s.freq = %r: expected an integer >= 1" % (where, freq))


def check(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    path, layers = argv[0], argv[1:]
    require_file(path)
    with open(path, encoding="utf-8") as f:
        raw = yaml.safe_load(f)
    if not isinstance(raw, dict):
        raise CheckFailed("%s: not a YAML mapping" % path)
    warnings.filterwarnings("ignore")
    import nvdlfw_inspect.api as debug_api
    from nvdlfw_inspect.config_manager import ConfigManager
    with tempfile.TemporaryDirectory() as d:
        features = os.path.join(d, "features")
        os.mkdir(features)
        write_stub_features(features, te_feature_names())
        debug_api.initialize(config_file=path, feature_dirs=[features], log_dir=os.path.join(d, "log"))
        try:
            for name in layers:
                ConfigManager.get_config_for_layer(name)
        finally:
            debug_api.end_debug()
    check_parameters(raw)
    return "%s: %d sections parsed by nvdlfw_inspect, %d layer names resolved" % (
        os.path.basename(path), len(raw), len(layers))


if __name__ == "__main__":
    sys.exit(main(check))
