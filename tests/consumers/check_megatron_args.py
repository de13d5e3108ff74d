#!/usr/bin/env python3
"""check_megatron_args.py FILE [TE_PRECISION_CONFIG]: the flags of a megatron_args.txt parse with Megatron's own
argument parser (megatron.training.arguments.add_megatron_arguments, prefixes not accepted), and
Megatron's own TransformerConfig accepts the FP8 settings they give (it rejects, e.g.,
--first-last-layers-bf16 with delayed scaling, or more BF16 layers than layers).

FILE is shell words (`#` starts a comment). TransformerConfig needs a model: the file's
--num-layers, else 96 layers (the check is of the FP8 settings), hidden 64, 4 heads.
--te-precision-config-file is loaded with Megatron's load_quantization_recipe (TE_PRECISION_CONFIG,
else the flag's value beside FILE) and given to TransformerConfig as quant_recipe, as
megatron/training/argument_utils.py does.
Megatron-Core 0.19.2 wants Python >= 3.12; the one 3.12 name its argument parser's imports use
here, typing.override, is given from typing_extensions (3.11 runs the check).

Older releases (run_checks.py megatron_args_0.13, megatron_args_0.16): FP8A_MEGATRON_SRC names the
release's megatron/core (its wheel, unpacked by scripts/consumers-env.sh) and FP8A_MEGATRON_PARSER
its argument parser's files, megatron-lm/<tag>/ here: no package index has megatron/training, so
they are copied from the Megatron-LM tag, byte for byte as their MANIFEST's git blob ids say. They
are imported without megatron/training/__init__.py, which loads the training loop, the tokenizers
and megatron.legacy; of megatron.training.utils, arguments.py takes four names that only
validate_args() calls, which this check does not (it builds TransformerConfig itself), so they are
stand-ins that fail when called."""
import argparse
import hashlib
import logging
import os
import shlex
import sys
import types
import typing
import warnings

from _common import CheckFailed, main, require_file

FP8_FIELDS = ("fp8", "fp8_recipe", "fp8_margin", "fp8_amax_history_len", "fp8_amax_compute_algo",
              "fp8_wgrad", "first_last_layers_bf16", "num_layers_at_start_in_bf16",
              "num_layers_at_end_in_bf16")
# Megatron-Core 0.15+ (TransformerConfig.fp4, fp4_recipe); exclusive with fp8.
FP4_FIELDS = ("fp4", "fp4_recipe", "first_last_layers_bf16", "num_layers_at_start_in_bf16",
              "num_layers_at_end_in_bf16")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise CheckFailed("Megatron's argument parser: %s" % message)


def git_blob_id(path):
    with open(path, "rb") as f:
        data = f.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def use_release_parser(root):
    """megatron.training from root (megatron-lm/<tag>/): its MANIFEST's files, each as the tag holds
    it, imported without the package's __init__.py (see the module's docstring)."""
    manifest = os.path.join(root, "MANIFEST")
    require_file(manifest)
    with open(manifest, encoding="utf-8") as f:
        entries = [line.split() for line in f if line.strip() and not line.startswith("#")]
    for blob, rel in entries:
        path = os.path.join(root, rel)
        require_file(path)
        if git_blob_id(path) != blob:
            raise CheckFailed("%s is not the Megatron-LM file its MANIFEST names (git blob %s)" % (path, blob))
    import megatron  # the namespace package of FP8A_MEGATRON_SRC's megatron/core
    training = types.ModuleType("megatron.training")
    training.__path__ = [os.path.join(root, "megatron", "training")]
    utils = types.ModuleType("megatron.training.utils")

    def called_by_validate_args_only(*_args, **_kwargs):
        raise CheckFailed("megatron.training.utils is a stand-in here: only validate_args() calls it")
    for name in ("get_device_arch_version", "update_use_dist_ckpt", "print_rank_0", "warn_rank_0"):
        setattr(utils, name, called_by_validate_args_only)
    training.utils = utils
    megatron.training = training
    sys.modules.update({"megatron.training": training, "megatron.training.utils": utils})


def check(argv):
    if len(argv) not in (1, 2):
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    require_file(argv[0])
    with open(argv[0], encoding="utf-8") as f:
        words = shlex.split(f.read(), comments=True)
    warnings.filterwarnings("ignore")
    # FP8A_MEGATRON_SRC: another Megatron release's megatron/ tree ahead of the venv's (core and
    # training: a git archive of a Megatron-LM tag, scripts/check-megatron-tags.sh; or core alone,
    # with FP8A_MEGATRON_PARSER, run_checks.py).
    if os.environ.get("FP8A_MEGATRON_SRC"):
        sys.path.insert(0, os.environ["FP8A_MEGATRON_SRC"])
    if os.environ.get("FP8A_MEGATRON_PARSER"):
        use_release_parser(os.environ["FP8A_MEGATRON_PARSER"])
    if not hasattr(typing, "override"):
        import typing_extensions
        typing.override = typing_extensions.override
    from megatron.training.arguments import add_megatron_arguments
    from megatron.core.transformer.transformer_config import TransformerConfig
    args = add_megatron_arguments(_Parser(allow_abbrev=False)).parse_args(words)
    kw = {k: getattr(args, k) for k in FP8_FIELDS}
    fp4 = getattr(args, "fp4", None)  # the FP4 flags: Megatron-Core 0.15+
    if hasattr(args, "fp4"):
        kw.update({k: getattr(args, k) for k in FP4_FIELDS})
    extra = {}
    if getattr(args, "te_precision_config_file", None):  # as megatron/training/argument_utils.py loads it
        from megatron.core.quantization.utils import load_quantization_recipe
        logging.getLogger("megatron.core.quantization").setLevel(logging.WARNING)  # it logs the file to stdout
        te_file = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(argv[0]), args.te_precision_config_file)
        require_file(te_file)
        extra["quant_recipe"] = load_quantization_recipe(te_file)
    TransformerConfig(num_layers=args.num_layers or 96, hidden_size=64, num_attention_heads=4, **kw, **extra)
    if args.fp8:
        shown = " ".join("%s=%s" % (k, v) for k in FP8_FIELDS for v in [kw[k]] if v is not None)
    elif fp4:
        shown = " ".join("%s=%s" % (k, kw[k]) for k in FP4_FIELDS if kw[k] is not None)
    else:
        shown = "fp8=None: every module BF16"
    if extra:
        shown += "; quant_recipe from %s: %d matchers" % (
            os.path.basename(te_file), len(extra["quant_recipe"].matchers))
    from megatron.core import package_info
    return "%s: %d words parsed by Megatron; %s [Megatron %s]" % (os.path.basename(argv[0]), len(words), shown,
                                                                package_info.__version__)


if __name__ == "__main__":
    sys.exit(main(check))
