# DelayedScaling has amax_history_len, not history.
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

fp8_recipe = DelayedScaling(fp8_format=Format.HYBRID, history=16)


def forward(model, *args, **kwargs):
    with te.autocast(enabled=True, recipe=fp8_recipe):
        return model(*args, **kwargs)
