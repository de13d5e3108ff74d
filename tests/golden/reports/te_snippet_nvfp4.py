# Transformer Engine code for the recommended recipe (fp8-advisor te_snippet.py).
# Written for Transformer Engine 2.20 (--te-version): te.autocast(recipe=...), TE 2.9+; --te-version 2.8 or older writes te.fp8_autocast.
# Recipe nvfp4/e4m3: every module under the autocast runs it. The plan's BF16 fallbacks
# are not here: nvdlfw_inspect.yaml (per GEMM) and te_precision_config.yaml (per module) have them.
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import NVFP4BlockScaling, Format

fp8_recipe = NVFP4BlockScaling(fp8_format=Format.E4M3)


def forward(model, *args, **kwargs):
    """model(*args, **kwargs) under the recommended recipe; call backward on the result as usual."""
    with te.autocast(enabled=True, recipe=fp8_recipe):
        return model(*args, **kwargs)
