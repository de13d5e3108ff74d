#!/usr/bin/env python3
"""check_megatron_moe.py FP8_ADVISOR: an MoE model from capture to configs, each in Megatron's own
code: every captured module's decision reaches exactly that module.

1. Builds a real Megatron-Core MoE GPTModel on the CPU (2 layers, hidden 64; per layer 4 routed
   experts, top-2, as SequentialMLP's local_experts; a shared expert; the TopKRouter; the local
   layer spec: the TE spec needs TE's library), bf16 under Float16Module, as check_megatron_model.py
   builds the dense one. One weight entry of layer 0's expert 1 linear_fc1 is set to 10^7 times the
   weight's largest, so that under per-tensor scaling the rest of that weight underflows: one
   expert the advisor should keep in BF16 beside experts it should not.
2. Captures training step 1 of 2 with fp8a_capture (the package as pip installed it) and runs
   `FP8_ADVISOR run --recipes current --format hybrid --cost none` on it.
3. Checks, for every linear module of the model (attention, routed and shared experts):
   - the capture recorded it under its named_modules() path, and nothing else (no router);
   - nvdlfw_inspect.yaml, loaded by nvdlfw_inspect with TE's debug features into
     DDP(Float16Module(GPTModel)) named by infer_and_assign_layer_names: TE's debug API disables
     exactly the GEMMs recipe.json keeps in BF16 for that module;
   - te_precision_config.yaml, resolved by Megatron's get_quant_config_or_none: the bf16 config
     exactly for the modules with a GEMM in BF16.
   The plan must be a mix (some expert with a BF16 GEMM, some expert all FP8), or the check proves
   nothing and fails.
Prints one line: "OK: ..." or "FAIL: ..."."""
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import warnings

from _common import CheckFailed, main
from check_megatron_model import megatron_on_cpu
from _te_debug import te_debug_features

GEMMS = ("fprop", "dgrad", "wgrad")


def moe_gpt():
    """(GPTModel, Float16Module(GPTModel), DDP over it), built on the CPU."""
    import torch
    megatron_on_cpu()
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.tensor_parallel import random as tp_random
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    # Beside megatron_on_cpu's stand-ins: the RNG tracker's fork around attention dropout (its
    # CUDA RNG state), which a forward needs.
    tp_random.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    torch.manual_seed(0)
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, bf16=True,
                               params_dtype=torch.bfloat16, use_cpu_initialization=True, num_moe_experts=4,
                               moe_router_topk=2, moe_ffn_hidden_size=32, moe_token_dispatcher_type="allgather",
                               moe_shared_expert_intermediate_size=32, add_bias_linear=False)
    gpt = GPTModel(config=config, vocab_size=128, max_sequence_length=32,
                   transformer_layer_spec=get_gpt_layer_local_spec(num_experts=4, moe_grouped_gemm=False))
    f16 = Float16Module(config, gpt)
    ddp = DistributedDataParallel(config, DistributedDataParallelConfig(), f16)
    return gpt, f16, ddp


def linear_modules(gpt):
    """{named_modules() path: module} of every module the capture hooks: Megatron's linears."""
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
    return {n: m for n, m in gpt.named_modules()
            if isinstance(m, (ColumnParallelLinear, RowParallelLinear)) and n.startswith("decoder.")}


def capture_and_run(binary, gpt, f16, work):
    import torch
    import fp8a_capture
    with torch.no_grad():  # the hard expert: one entry 10^7 x the weight's largest
        w = gpt.decoder.layers[0].mlp.experts.local_experts[1].linear_fc1.weight
        w[0, 0] = 1e7 * w.abs().max()
    cap_dir, out_dir = os.path.join(work, "capture"), os.path.join(work, "out")
    cap = fp8a_capture.attach(gpt, cap_dir, steps=[1], name_regex=r"^decoder\.")
    mask = torch.triu(torch.ones(1, 1, 16, 16, dtype=torch.bool), 1)  # causal (Megatron's own is made on CUDA)
    for step in range(2):
        g = torch.Generator().manual_seed(step)
        tokens = torch.randint(0, 128, (4, 16), generator=g)
        position = torch.arange(16).unsqueeze(0).expand(4, 16)
        loss = f16(tokens, position, mask, labels=tokens)
        loss.float().mean().backward()
        gpt.zero_grad(set_to_none=True)
        cap.step()
    cap.detach()
    p = subprocess.run([binary, "run", "--capture", cap_dir, "--out", out_dir, "--recipes", "current",
                        "--format", "hybrid", "--cost", "none"], capture_output=True, text=True)
    if p.returncode != 0:
        raise CheckFailed("fp8-advisor run exit %d: %s" % (p.returncode, (p.stderr or p.stdout).strip()[-400:]))
    return cap.layers, out_dir


def check(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    binary = os.path.abspath(argv[0])
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory() as work:
        with contextlib.redirect_stdout(sys.stderr):  # Megatron prints; the verdict is stdout's one line
            gpt, f16, ddp = moe_gpt()  # before TE's stand-ins: Megatron must see no TE
            modules = linear_modules(gpt)
            captured, out = capture_and_run(binary, gpt, f16, work)
        if sorted(captured) != sorted(modules):
            raise CheckFailed("captured %s; the model's linear modules are %s" % (sorted(captured), sorted(modules)))
        with open(os.path.join(out, "recipe.json"), encoding="utf-8") as f:
            layers = {l["layer"]: l for l in json.load(f)["layers"]}
        if sorted(layers) != sorted(modules):
            raise CheckFailed("recipe.json decides %s, not the captured modules" % sorted(layers))
        bf16_of = {n: frozenset(g for g in GEMMS if layers[n]["gemms"][g]["precision"] == "bf16") for n in modules}
        experts = [n for n in modules if ".local_experts." in n]
        if not any(bf16_of[n] for n in experts) or all(bf16_of[n] for n in experts):
            raise CheckFailed("the plan is no mix of FP8 and BF16 experts (%s): the check would prove nothing"
                              % ", ".join("%s=%s" % (n, sorted(bf16_of[n])) for n in experts))

        # nvdlfw_inspect.yaml in the wrapped model, through TE's debug API.
        features = te_debug_features()
        import nvdlfw_inspect.api as debug_api
        with tempfile.TemporaryDirectory() as logs:
            debug_api.initialize(config_file=os.path.join(out, "nvdlfw_inspect.yaml"), feature_dirs=[features],
                                 log_dir=logs)
            try:
                debug_api.infer_and_assign_layer_names([ddp])
                for n, m in modules.items():
                    got = frozenset(g for g in GEMMS if not debug_api.transformer_engine.fp8_gemm_enabled(
                        layer_name=m.name, gemm=g, iteration=0)[0])
                    if got != bf16_of[n]:
                        raise CheckFailed("nvdlfw_inspect.yaml: %s (debug-API name %s) has BF16 GEMMs %s; recipe.json "
                                          "says %s" % (n, m.name, sorted(got), sorted(bf16_of[n])))
            finally:
                debug_api.end_debug()

        # te_precision_config.yaml, resolved by Megatron.
        from check_megatron import _megatron
        utils = _megatron()[0]
        recipe = utils.load_quantization_recipe(os.path.join(out, "te_precision_config.yaml"))
        for n in modules:
            q = utils.get_quant_config_or_none(n, recipe)
            got = q.config_key if q else "-"
            if (got == "bf16") != bool(bf16_of[n]):
                raise CheckFailed("te_precision_config.yaml: %s resolves to %r; recipe.json's BF16 GEMMs there: %s"
                                  % (n, got, sorted(bf16_of[n])))
    kept = sorted(n for n in modules if bf16_of[n])
    return ("%d linear modules of a Megatron MoE GPTModel (%d of routed experts, shared experts) captured and "
            "planned; BF16 in %s; nvdlfw_inspect.yaml and te_precision_config.yaml reach exactly those in "
            "Megatron's and TE's code" % (len(modules), len(experts), ", ".join(kept)))


if __name__ == "__main__":
    sys.exit(main(check))
