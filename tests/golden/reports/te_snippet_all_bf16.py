# Transformer Engine code for the recommended recipe (fp8-advisor te_snippet.py).
# Written for Transformer Engine 2.20 (--te-version): te.autocast(recipe=...), TE 2.9+; --te-version 2.8 or older writes te.fp8_autocast.
# The plan keeps no GEMM in FP8 (current/hybrid chosen, every GEMM BF16): train in BF16, no FP8 autocast,
# so TE runs every module in BF16, those never captured too.


def forward(model, *args, **kwargs):
    """model(*args, **kwargs) in BF16: the plan keeps no GEMM in FP8."""
    return model(*args, **kwargs)
