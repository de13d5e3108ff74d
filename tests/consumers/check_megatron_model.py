#!/usr/bin/env python3
"""check_megatron_model.py FILE NUM_LAYERS [MODULE=GEMMS:TENSORS ...]: nvdlfw_inspect.yaml does
in a Megatron-Core training model what the plan says: exactly the plan's BF16 GEMMs disabled,
exactly the watched tensors logged, every other GEMM quantized.

Builds a real Megatron-Core GPTModel (NUM_LAYERS layers, hidden 64, the local layer spec: the TE
spec needs TE's library; both name the linear modules alike) on the CPU with a one-rank gloo
group, wraps it as Megatron's training loop does (megatron.training.training.get_model: bf16 ->
Float16Module, then Megatron-Core's DistributedDataParallel; DDP allocates its buffers on
torch.cuda.current_device() and makes a torch.cuda.Stream, so those two are pointed at the CPU),
runs nvdlfw_inspect's initialize(FILE) with TE's own debug features (_te_debug.py), names the
modules with infer_and_assign_layer_names([ddp]) as the tensor-inspect integrations do, and asks
TE's debug API, as a TE module asks it in training, about every linear module of the decoder:
fp8_gemm_enabled(layer_name, gemm) for fprop/dgrad/wgrad and inspect_tensor_enabled(layer_name,
tensor) for activation/weight/gradient at iteration 0.

MODULE is a named_modules() path of the unwrapped GPTModel (decoder.layers.0.mlp.linear_fc2,
0-based: the names a capture hook records), or * for every module not listed. GEMMS: the BF16
GEMMs ("fprop,dgrad,wgrad", "-" none); TENSORS: the logged tensors ("-" none). Unlisted modules
with no *: every GEMM FP8, nothing logged."""
import contextlib
import os
import sys
import tempfile
import warnings

from _common import CheckFailed, main, require_file
from _te_debug import te_debug_features

GEMMS = ("fprop", "dgrad", "wgrad")
TENSORS = ("activation", "weight", "gradient")
LINEARS = ("self_attention.linear_qkv", "self_attention.linear_proj", "mlp.linear_fc1", "mlp.linear_fc2")


def _set(text):
    return frozenset() if text == "-" else frozenset(text.split(","))


def megatron_on_cpu():
    """Megatron-Core ready on the CPU: a one-rank gloo group, model parallelism of 1, and
    stand-ins for what it takes from CUDA (the device of its buffers, the stream DDP makes)."""
    import torch
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state
    parallel_state.initialize_model_parallel(1, 1)

    class _CpuStream:
        def __init__(self, *args, **kwargs):
            pass

        def wait_stream(self, stream):
            pass

    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.Stream = _CpuStream


def wrapped_gpt(num_layers):
    """The GPTModel and the DDP(Float16Module(GPTModel)) Megatron trains."""
    import torch
    megatron_on_cpu()
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig
    config = TransformerConfig(num_layers=num_layers, hidden_size=64, num_attention_heads=4, bf16=True,
                               params_dtype=torch.bfloat16, use_cpu_initialization=True)
    gpt = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=128,
                   max_sequence_length=32)
    ddp = DistributedDataParallel(config, DistributedDataParallelConfig(), Float16Module(config, gpt))
    return gpt, ddp


def check(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    path, num_layers = argv[0], int(argv[1])
    require_file(path)
    expected, default = {}, (frozenset(), frozenset())
    for a in argv[2:]:
        module, _, spec = a.partition("=")
        gemms, _, tensors = spec.partition(":")
        plan = (_set(gemms), _set(tensors))
        if module == "*":
            default = plan
        else:
            expected[module] = plan
    warnings.filterwarnings("ignore")
    with contextlib.redirect_stdout(sys.stderr):  # Megatron prints; the verdict is stdout's one line
        gpt, ddp = wrapped_gpt(num_layers)  # before TE's stand-ins: Megatron must see no TE
    features = te_debug_features()
    import nvdlfw_inspect.api as debug_api
    modules = [(n, m) for n, m in gpt.named_modules() if n.startswith("decoder.layers.") and n.endswith(LINEARS)]
    unknown = set(expected) - {n for n, _ in modules}
    if unknown:
        raise CheckFailed("not a linear module of the %d-layer GPTModel: %s" % (num_layers, ", ".join(sorted(unknown))))
    bf16 = logged = 0
    with tempfile.TemporaryDirectory() as d:
        debug_api.initialize(config_file=path, feature_dirs=[features], log_dir=d)
        try:
            debug_api.infer_and_assign_layer_names([ddp])
            for path_name, module in modules:
                want_bf16, want_log = expected.get(path_name, default)
                got_bf16 = frozenset(g for g in GEMMS if not debug_api.transformer_engine.fp8_gemm_enabled(
                    layer_name=module.name, gemm=g, iteration=0)[0])
                got_log = frozenset(t for t in TENSORS if debug_api.transformer_engine.inspect_tensor_enabled(
                    layer_name=module.name, tensor_name=t, iteration=0)[0])
                if (got_bf16, got_log) != (want_bf16, want_log):
                    raise CheckFailed("%s (nvdlfw name %s): BF16 GEMMs %s, logged %s; the plan says %s, %s" % (
                        path_name, module.name, _text(got_bf16, GEMMS), _text(got_log, TENSORS),
                        _text(want_bf16, GEMMS), _text(want_log, TENSORS)))
                bf16 += len(got_bf16)
                logged += 1 if got_log else 0
        finally:
            debug_api.end_debug()
    return "%s: %d linear modules of DDP(Float16Module(GPTModel)), named %s...; %d GEMMs BF16, %d modules logged, " \
           "as planned" % (os.path.basename(path), len(modules), modules[0][1].name, bf16, logged)


def _text(items, order):
    return "[%s]" % ",".join(x for x in order if x in items)


if __name__ == "__main__":
    sys.exit(main(check))
