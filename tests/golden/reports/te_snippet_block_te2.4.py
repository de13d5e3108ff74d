# Transformer Engine code for the recommended recipe (fp8-advisor te_snippet.py).
# Written for Transformer Engine 2.4 (--te-version): te.fp8_autocast(fp8_recipe=...); TE 2.9+ name it te.autocast(recipe=...).
# Recipe block:fp32/e4m3: every module under the autocast runs it. The plan's BF16 fallbacks
# are not here: nvdlfw_inspect.yaml (per GEMM) and te_precision_config.yaml (per module) have them.
import os

os.environ["NVTE_FP8_BLOCK_SCALING_FP32_SCALES"] = "1"  # TE reads it at import: set it first
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import Float8BlockScaling, Format

fp8_recipe = Float8BlockScaling(fp8_format=Format.E4M3)


def forward(model, *args, **kwargs):
    """model(*args, **kwargs) under the recommended recipe; call backward on the result as usual."""
    with te.fp8_autocast(enabled=True, fp8_recipe=fp8_recipe):
        return model(*args, **kwargs)
