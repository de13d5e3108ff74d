#!/usr/bin/env python3
"""check_bridge.py FILE NUM_LAYERS [NAME=PATH ...] [MODULE_PATH=CONFIG ...]: a megatron_bridge.yaml
merged into a Megatron-Bridge ConfigContainer by Bridge's own override code gives Megatron-Core
the configuration the plan says.

Runs, with Megatron-Bridge's sources (FP8A_BRIDGE_SRC: a release's wheel unpacked by
scripts/consumers-env.sh) on the Megatron-Core release Bridge pins (FP8A_MEGATRON_SRC, 0.16.1):
omegaconf_utils.process_config_with_overrides(cfg, config_filepath=FILE), the call Bridge's
example scripts make for --config-file, on a container of Megatron-Core's TransformerConfig
(NUM_LAYERS layers), OptimizerConfig and DistributedDataParallelConfig, once with Bridge's
recipes' default mixed_precision "bf16_mixed" and once with its bf16_with_fp8_current_scaling_mixed()
(the file's fields must win over both: the two results must be the same); then what Bridge does
before training (config.runtime_config_update): MixedPrecisionConfig.finalize() and setup(model,
optimizer, ddp), TensorInspectConfig.finalize(), and TransformerConfig.__post_init__ (Megatron's
checks). Reports the fields Megatron reads: fp8, fp8_recipe, the layers Megatron-Core's
is_first_last_bf16_layer keeps BF16, fp8_param, the quant_recipe's matchers (each MODULE_PATH
must resolve through Megatron-Core's get_quant_config_or_none to CONFIG, "-" = no matcher) and
tensor_inspect's features file.
NAME=PATH puts PATH where the file names NAME (te_precision_config.yaml, nvdlfw_inspect.yaml): the
check runs in a folder holding the file and those, as a job launched beside them.
Fails on any warning while Bridge's override code runs (it drops a key its _target_ does not take,
skips a key the config lacks and goes on past a _target_ that fails, each with a warning), a mixed_precision or tensor_inspect that is not Bridge's config class, a referenced
file missing, or a features file with names newer than the TE Bridge requires (its METADATA).

Bridge's package __init__ imports its model bridges, which need transformers and TE's library;
the modules run here import neither, so megatron.bridge and its subpackages are entered without
their __init__ and megatron.bridge.models is a stand-in holding Megatron-Core's TransformerConfig
as GPTModelProvider (a TransformerConfig subclass; mixed_precision.py names it in annotations
only). TensorInspectConfig is training/config.py's class, its source run alone (config.py imports
every model)."""
import ast
import contextlib
import copy
import dataclasses
import glob
import importlib
import logging
import os
import re
import shutil
import sys
import tempfile
import types
import warnings

import yaml

from _common import CheckFailed, main, require_file

BRIDGE_SRC = os.environ.get("FP8A_BRIDGE_SRC") or os.path.join(sys.prefix, "share", "fp8a", "megatron-bridge-0.3.1")
BRIDGE_DEPS = os.path.join(sys.prefix, "share", "fp8a", "bridge-deps")


def _package(name, path):
    m = types.ModuleType(name)
    m.__path__ = [path]
    sys.modules[name] = m
    return m


def _bridge():
    """Bridge's mixed_precision and omegaconf_utils modules, its TensorInspectConfig, and the
    Megatron-Core classes they configure."""
    warnings.filterwarnings("ignore")
    root = os.path.join(BRIDGE_SRC, "megatron", "bridge")
    if not os.path.isfile(os.path.join(root, "training", "mixed_precision.py")):
        raise CheckFailed("Megatron-Bridge's sources not found at %s (run scripts/consumers-env.sh)" % BRIDGE_SRC)
    sys.path[:0] = [BRIDGE_DEPS] + ([os.environ["FP8A_MEGATRON_SRC"]] if os.environ.get("FP8A_MEGATRON_SRC") else [])
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer.transformer_config import TransformerConfig
    _package("megatron.bridge", root)
    for sub in ("training", "training/utils", "utils"):
        _package("megatron.bridge." + sub.replace("/", "."), os.path.join(root, sub))
    models = _package("megatron.bridge.models", os.path.join(root, "models"))
    models.GPTModelProvider = models.T5ModelProvider = TransformerConfig
    mp = importlib.import_module("megatron.bridge.training.mixed_precision")
    # No TE here: MixedPrecisionConfig's FP4 check (is_te_min_version("2.7.0.dev0")) asks the TE that
    # Bridge's METADATA pins, the newest release below its upper bound.
    _, upper = _te_pin()
    if upper is not None:
        from packaging.version import Version
        pinned = Version("%d.%d" % (upper[0], upper[1] - 1) if upper[1] > 0 else "%d" % (upper[0] - 1))
        mp.is_te_min_version = lambda version, check_equality=True: (
            pinned >= Version(version) if check_equality else pinned > Version(version))
    ou = importlib.import_module("megatron.bridge.training.utils.omegaconf_utils")
    path = os.path.join(root, "training", "config.py")
    with open(path, encoding="utf-8") as f:
        src = f.read()
    cls = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == "TensorInspectConfig")
    config = types.ModuleType("megatron.bridge.training.config")
    config.__file__ = path
    sys.modules[config.__name__] = config
    prelude = "from dataclasses import dataclass\nfrom pathlib import Path\nfrom typing import Any\n"
    decorators = "".join("@%s\n" % ast.get_source_segment(src, d) for d in cls.decorator_list)
    exec(compile(prelude + decorators + ast.get_source_segment(src, cls), path, "exec"), config.__dict__)
    return mp, ou, config.TensorInspectConfig, TransformerConfig, OptimizerConfig, DistributedDataParallelConfig


def _te_pin():
    """Bridge's transformer-engine requirement from its wheel's METADATA, and its upper bound."""
    for meta in glob.glob(os.path.join(BRIDGE_SRC, "megatron_bridge-*.dist-info", "METADATA")):
        with open(meta, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"Requires-Dist: transformer-engine(\[[^\]]*\])?(?P<spec>[^;]*)", line)
                if m:
                    spec = m.group("spec").strip()
                    upper = re.search(r"<\s*(\d+)\.(\d+)", spec)
                    return spec, (int(upper.group(1)), int(upper.group(2))) if upper else None
    raise CheckFailed("no transformer-engine requirement in Megatron-Bridge's METADATA under %s" % BRIDGE_SRC)


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.seen = []

    def emit(self, record):  # Bridge's instantiate warns through the root logger
        self.seen.append(" ".join(record.getMessage().split()))


def _configure(path, base, mods):
    mp, ou, TensorInspectConfig, TransformerConfig, OptimizerConfig, DDPConfig = mods

    @dataclasses.dataclass
    class Container:  # ConfigContainer's fields that the file may set
        model: TransformerConfig
        optimizer: OptimizerConfig
        ddp: DDPConfig
        mixed_precision: object = None
        tensor_inspect: object = None

    cfg = Container(model=copy.deepcopy(base[0]), optimizer=OptimizerConfig(), ddp=DDPConfig(),
                    mixed_precision=copy.deepcopy(base[1]))
    caught = _Warnings()
    logging.getLogger().addHandler(caught)
    try:
        ou.process_config_with_overrides(cfg, config_filepath=path)
    finally:
        logging.getLogger().removeHandler(caught)
    if caught.seen:
        raise CheckFailed("Bridge's override code: %s" % "; ".join(caught.seen))
    if isinstance(cfg.mixed_precision, str):  # as config.runtime_config_update does
        cfg.mixed_precision = mp.get_mixed_precision_config(cfg.mixed_precision)
    if not isinstance(cfg.mixed_precision, mp.MixedPrecisionConfig):
        raise CheckFailed("mixed_precision is a %s, not Bridge's MixedPrecisionConfig (runtime_config_update "
                          "calls its finalize())" % type(cfg.mixed_precision).__name__)
    cfg.mixed_precision.finalize()
    cfg.mixed_precision.setup(cfg.model, cfg.optimizer, cfg.ddp)
    if cfg.tensor_inspect is not None:
        if not isinstance(cfg.tensor_inspect, TensorInspectConfig):
            raise CheckFailed("tensor_inspect is a %s, not Bridge's TensorInspectConfig"
                              % type(cfg.tensor_inspect).__name__)
        cfg.tensor_inspect.finalize()
    cfg.model.__post_init__()
    return cfg


def _summary(cfg, num_layers):
    from megatron.core.fp8_utils import is_first_last_bf16_layer
    m = cfg.model
    fp8 = m.fp8
    recipe = getattr(m.fp8_recipe, "value", m.fp8_recipe)
    fp4 = getattr(m, "fp4", None)
    # fp4_utils.get_fp4_context applies the same first/last rule as is_first_last_bf16_layer.
    bf16 = [i for i in range(num_layers) if (fp8 or fp4) and is_first_last_bf16_layer(m, i)]
    parts = ["fp8 %s" % fp8]
    if fp4:
        parts.append("fp4 %s, fp4_recipe %s, BF16 layers %s of %d"
                     % (fp4, getattr(m.fp4_recipe, "value", m.fp4_recipe), bf16, num_layers))
    if fp8:
        parts.append("fp8_recipe %s" % recipe)
        if recipe == "delayed":
            parts.append("margin %d, history %d, %s" % (m.fp8_margin, m.fp8_amax_history_len, m.fp8_amax_compute_algo))
        parts.append("BF16 layers %s of %d" % (bf16, num_layers))
    parts.append("fp8_param %s" % m.fp8_param)
    return ", ".join(parts)


def check(argv):
    if len(argv) < 2 or not argv[1].isdigit():
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    path, num_layers, files, expects = argv[0], int(argv[1]), {}, []
    for a in argv[2:]:
        left, sep, right = a.partition("=") if a.split("=", 1)[0].endswith(".yaml") else a.rpartition("=")
        if not sep or not left:
            print("expected NAME=PATH or MODULE_PATH=CONFIG, got %r" % a, file=sys.stderr)
            sys.exit(2)
        if left.endswith(".yaml"):
            files[left] = os.path.abspath(right)
        else:
            expects.append((left, right))
    require_file(path)
    mods = _bridge()
    mp, TransformerConfig = mods[0], mods[3]
    from megatron.core import package_info as core_info
    from megatron.core.quantization import utils as qutils
    from megatron.core.quantization.quant_config import RecipeConfig
    import torch
    model = TransformerConfig(num_layers=num_layers, hidden_size=64, num_attention_heads=4, bf16=True,
                              params_dtype=torch.bfloat16)
    bases = [("bf16_mixed", (model, "bf16_mixed")),
             ("bf16_with_fp8_current_scaling_mixed", (model, mp.bf16_with_fp8_current_scaling_mixed()))]
    runs = []
    with tempfile.TemporaryDirectory() as job:
        shutil.copy(path, os.path.join(job, "megatron_bridge.yaml"))
        for name, src in files.items():
            require_file(src)
            shutil.copy(src, os.path.join(job, name))
        cwd = os.getcwd()
        os.chdir(job)
        try:
            for label, base in bases:
                with contextlib.redirect_stdout(sys.stderr):
                    cfg = _configure("megatron_bridge.yaml", base, mods)
                runs.append((label, cfg, _summary(cfg, num_layers)))
            first = runs[0]
            for label, cfg, summary in runs[1:]:
                if summary != first[2] or repr(cfg.model.quant_recipe) != repr(first[1].model.quant_recipe) or \
                        repr(cfg.tensor_inspect) != repr(first[1].tensor_inspect):
                    raise CheckFailed("over %s: %s; over %s: %s" % (first[0], first[2], label, summary))
            cfg = first[1]
            out = [_summary(cfg, num_layers)]
            q = cfg.model.quant_recipe
            if q is not None:
                if not isinstance(q, RecipeConfig):
                    raise CheckFailed("model.quant_recipe is a %s, not Megatron-Core's RecipeConfig" % type(q).__name__)
                out.append("quant_recipe %d matchers" % len(q.matchers))
            elif expects:
                raise CheckFailed("no model.quant_recipe to resolve module paths with")
            for module, want in expects:
                got = qutils.get_quant_config_or_none(module, q)
                got = got.config_key if got else "-"
                if got != want:
                    raise CheckFailed("%s resolves to config %r, expected %r" % (module, got, want))
            if expects:
                out[-1] += ", %d module paths resolved as expected" % len(expects)
            t = cfg.tensor_inspect
            if t is not None and t.enabled:
                features = str(t.features)
                require_file(features)
                with open(features, encoding="utf-8") as f:
                    sections = yaml.safe_load(f) or {}
                spec, upper = _te_pin()
                newer = sorted({k for sec in sections.values() if isinstance(sec, dict)
                                for k in (sec.get("transformer_engine") or {})
                                if k in ("DisableQuantizationGEMM", "DisableQuantizationLayer")})
                if newer and upper is not None and upper <= (2, 13):
                    raise CheckFailed("tensor_inspect.features %s uses %s, TE 2.13+ names; Megatron-Bridge "
                                      "requires transformer-engine%s" % (features, ", ".join(newer), spec))
                out.append("tensor_inspect %s" % features)
            else:
                out.append("no tensor_inspect")
        finally:
            os.chdir(cwd)
    bridge = importlib.import_module("megatron.bridge.package_info").__version__
    return "%s over %s: %s [Megatron-Bridge %s, Megatron-Core %s]" % (
        os.path.basename(path), " and ".join(label for label, _ in bases), "; ".join(out), bridge,
        core_info.__version__)


if __name__ == "__main__":
    sys.exit(main(check))
