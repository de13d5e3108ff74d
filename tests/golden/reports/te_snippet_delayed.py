# Transformer Engine code for the recommended recipe (fp8-advisor te_snippet.py).
# Written for Transformer Engine 2.20 (--te-version): te.autocast(recipe=...), TE 2.9+; --te-version 2.8 or older writes te.fp8_autocast.
# Recipe delayed:history=1024:algo=max:margin=1/hybrid: every module under the autocast runs it. The plan's BF16 fallbacks
# are not here: nvdlfw_inspect.yaml (per GEMM) and te_precision_config.yaml (per module) have them.
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

fp8_recipe = DelayedScaling(fp8_format=Format.HYBRID, margin=1, amax_history_len=1024, amax_compute_algo="max")


def forward(model, *args, **kwargs):
    """model(*args, **kwargs) under the recommended recipe; call backward on the result as usual."""
    with te.autocast(enabled=True, recipe=fp8_recipe):
        return model(*args, **kwargs)
