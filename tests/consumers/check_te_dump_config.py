#!/usr/bin/env python3
"""check_te_dump_config.py: the nvdlfw_inspect config fp8a_capture.te_dump_config writes (the
package as pip installed it) makes TE's own DumpTensors feature dump exactly what it says: loaded
by nvdlfw_inspect with TE's debug features, the debug API's inspect_tensor_enabled is true for
activation, weight and gradient of Megatron's fused modules (linear_qkv, linear_fc1) and a
LayerNormMLP's fc1/fc2 at the requested iterations only, and false for the modules the capture
hook takes itself (linear_proj, linear_fc2) and for other tensors; a layer regex with a quote
survives the YAML. Prints one line: "OK: ..." or "FAIL: ..."."""
import os
import sys
import tempfile
import warnings

from _common import CheckFailed, main
from _te_debug import te_debug_features

STEPS = [3, 10]


def check(argv):
    if argv:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    warnings.filterwarnings("ignore")
    import fp8a_capture
    features = te_debug_features()
    import nvdlfw_inspect.api as debug_api
    fused = ["model.module.module.decoder.layers.1.self_attention.linear_qkv",
             "model.module.module.decoder.layers.2.mlp.linear_fc1", "model.transformer.layers.0.layernorm_mlp.fc1",
             "model.transformer.layers.0.layernorm_mlp.fc2"]
    others = ["model.module.module.decoder.layers.1.self_attention.linear_proj",
              "model.module.module.decoder.layers.2.mlp.linear_fc2"]
    checked = 0
    with tempfile.TemporaryDirectory() as d:
        cases = [(os.path.join(d, "dump.yaml"), {}, fused, others),
                 (os.path.join(d, "quote.yaml"), {"layer_regex": r"it's|linear_proj$"}, others[:1], fused)]
        for path, kw, want, not_want in cases:
            fp8a_capture.te_dump_config(path, STEPS, **kw)
            debug_api.initialize(config_file=path, feature_dirs=[features], log_dir=os.path.join(d, "log"))
            try:
                for layer in want + not_want:
                    for tensor in ("activation", "weight", "gradient", "output", "wgrad"):
                        for it in range(12):
                            got = bool(debug_api.transformer_engine.inspect_tensor_enabled(
                                layer_name=layer, tensor_name=tensor, iteration=it)[0])
                            expected = layer in want and tensor in ("activation", "weight", "gradient") and it in STEPS
                            if got != expected:
                                raise CheckFailed("%s: %s %s at iteration %d: DumpTensors %s, expected %s" % (
                                    os.path.basename(path), layer, tensor, it, got, expected))
                            checked += 1
            finally:
                debug_api.end_debug()
    return ("te_dump_config: TE's DumpTensors, through nvdlfw_inspect, dumps X, W and dY of the fused modules at "
            "iterations %s only; %d answers checked" % (STEPS, checked))


if __name__ == "__main__":
    sys.exit(main(check))
