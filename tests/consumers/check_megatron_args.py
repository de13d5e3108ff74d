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
here, typing.override, is given from typing_extensions (3.11 runs the check)."""
import argparse
import logging
import os
import shlex
import sys
import typing
import warnings

from _common import CheckFailed, main, require_file

FP8_FIELDS = ("fp8", "fp8_recipe", "fp8_margin", "fp8_amax_history_len", "fp8_amax_compute_algo",
              "fp8_wgrad", "first_last_layers_bf16", "num_layers_at_start_in_bf16",
              "num_layers_at_end_in_bf16")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise CheckFailed("Megatron's argument parser: %s" % message)


def check(argv):
    if len(argv) not in (1, 2):
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    require_file(argv[0])
    with open(argv[0], encoding="utf-8") as f:
        words = shlex.split(f.read(), comments=True)
    warnings.filterwarnings("ignore")
    # FP8A_MEGATRON_SRC: another Megatron release's megatron/ tree (core and training) ahead of the
    # venv's, e.g. a git archive of a Megatron-LM tag (docs/VERSIONS.md: 0.13.1 and 0.16.1).
    if os.environ.get("FP8A_MEGATRON_SRC"):
        sys.path.insert(0, os.environ["FP8A_MEGATRON_SRC"])
    if not hasattr(typing, "override"):
        import typing_extensions
        typing.override = typing_extensions.override
    from megatron.training.arguments import add_megatron_arguments
    from megatron.core.transformer.transformer_config import TransformerConfig
    args = add_megatron_arguments(_Parser(allow_abbrev=False)).parse_args(words)
    kw = {k: getattr(args, k) for k in FP8_FIELDS}
    extra = {}
    if getattr(args, "te_precision_config_file", None):  # as megatron/training/argument_utils.py loads it
        from megatron.core.quantization.utils import load_quantization_recipe
        logging.getLogger("megatron.core.quantization").setLevel(logging.WARNING)  # it logs the file to stdout
        te_file = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(argv[0]), args.te_precision_config_file)
        require_file(te_file)
        extra["quant_recipe"] = load_quantization_recipe(te_file)
    TransformerConfig(num_layers=args.num_layers or 96, hidden_size=64, num_attention_heads=4, **kw, **extra)
    shown = " ".join("%s=%s" % (k, v) for k, v in kw.items() if v is not None) if args.fp8 else \
        "fp8=None: every module BF16"
    if extra:
        shown += "; quant_recipe from %s: %d matchers" % (
            os.path.basename(te_file), len(extra["quant_recipe"].matchers))
    from megatron.core import package_info
    return "%s: %d words parsed by Megatron; %s [Megatron %s]" % (os.path.basename(argv[0]), len(words), shown,
                                                                package_info.__version__)


if __name__ == "__main__":
    sys.exit(main(check))
