# te.autocast with fp8_autocast's keyword (TE 2.9+ name it recipe=).
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import Float8CurrentScaling, Format

fp8_recipe = Float8CurrentScaling(fp8_format=Format.HYBRID)


def forward(model, *args, **kwargs):
    with te.autocast(enabled=True, fp8_recipe=fp8_recipe):
        return model(*args, **kwargs)
