#!/usr/bin/python3
"""run_checks.py CONSUMER VENV: runs CONSUMER's checker in VENV on the samples of
tests/consumers/samples/: each good sample must pass ("OK: ..."), each bad one must fail with
the expected reason (a substring of its "FAIL: ..." line). CONSUMER recipe_json checks the golden
recipe_*.json files of tests/golden/reports/ against reports/consumers/recipe.schema.json and builds their
"recipe" with TE's recipe classes. CONSUMER loader runs check_loader.py (the recipe.json loader
of python/, as installed in VENV). Exits 77 (skipped, for ctest's
SKIP_RETURN_CODE) when VENV has no python: create it with `bash scripts/consumers-env.sh`."""
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
S = os.path.join(HERE, "samples")
SCHEMA = os.path.join(S, "schema", "recipe_min.schema.json")
# recipe.json's real schema and the files the report tests write (tests/reports/test_recipe_json.cpp).
RECIPE_SCHEMA = os.path.join(HERE, "..", "..", "reports", "consumers", "recipe.schema.json")
RECIPE_GOLDENS = sorted(glob.glob(os.path.join(HERE, "..", "golden", "reports", "recipe_*.json")))
OK = "OK: "
# The checkers that import torch (through Megatron-Core, nvdlfw_inspect or torchao).
HEAVY_CHECKERS = ("check_megatron.py", "check_megatron_args.py", "check_megatron_model.py", "check_bridge.py",
                  "check_nvdlfw.py", "check_torchao.py", "check_loader.py", "check_log_config.py")
# Megatron module paths (local layer indices) and what good_precision.yaml maps them to.
MEGATRON_PATHS = ["decoder.layers.0.self_attention.linear_qkv=bf16",
                  "decoder.layers.3.mlp.linear_fc2=bf16",
                  "decoder.layers.2.mlp.linear_fc1=mxfp8",
                  "decoder.layers.1.mlp.linear_fc2=tensorwise_hybrid",
                  "decoder.layers.10.mlp.linear_fc2=tensorwise_hybrid",
                  "output_layer=tensorwise_hybrid"]
NVDLFW_LAYERS = ["model.decoder.layers.2.mlp.linear_fc2", "model.decoder.layers.1.self_attention.linear_qkv",
                 "model.decoder.layers.3.mlp.linear_fc1", "model.decoder.layers.4.mlp.linear_fc1"]

def _recipe_json_cases():
    """Every golden recipe.json against the schema; the "recipe" of each (when one was chosen)
    through TE's recipe classes; hand-broken files that the schema must reject."""
    cases = []
    for path in [os.path.abspath(p) for p in RECIPE_GOLDENS]:
        cases.append(([RECIPE_SCHEMA, path], OK, "check_schema.py"))
        with open(path, encoding="utf-8") as f:
            if json.load(f).get("recipe") is not None:
                cases.append(([path], OK, "check_te_recipe.py"))
    cases.append(([RECIPE_SCHEMA, "schema/bad_recipe_json_f32_scales.json"],
                  "at /recipe: ", "check_schema.py"))
    cases.append(([RECIPE_SCHEMA, "schema/bad_recipe_json_gemm_mixed.json"],
                  "at /layers/1/gemms/dgrad/precision: 'mixed' is not one of ['fp8', 'bf16']",
                  "check_schema.py"))
    return cases

# The golden files of tests/reports/test_configs.cpp, which fp8-advisor writes.
G = os.path.join(os.path.dirname(HERE), "golden", "reports")

# megatron_bridge.yaml's goldens with the files beside them they name, for Bridge's override code.
_BRIDGE_OVER = " over bf16_mixed and bf16_with_fp8_current_scaling_mixed: "
BRIDGE_CASES = [
    ([os.path.join(G, "megatron_bridge_mixed_te2.12.yaml"), "4",
      "te_precision_config.yaml=" + os.path.join(G, "te_precision_config_mixed.yaml"),
      "nvdlfw_inspect.yaml=" + os.path.join(G, "nvdlfw_inspect_mixed_te2.4.yaml"),
      "decoder.layers.0.self_attention.linear_qkv=bf16", "decoder.layers.1.mlp.linear_fc1=bf16",
      "decoder.layers.2.self_attention.linear_proj=tensorwise_hybrid"],
     OK + "megatron_bridge_mixed_te2.12.yaml" + _BRIDGE_OVER + "fp8 hybrid, fp8_recipe tensorwise, BF16 layers "
     "[0, 3] of 4, fp8_param False; quant_recipe 5 matchers, 3 module paths resolved as expected; "
     "tensor_inspect nvdlfw_inspect.yaml [Megatron-Bridge "),
    ([os.path.join(G, "megatron_bridge_mixed.yaml"), "4",
      "te_precision_config.yaml=" + os.path.join(G, "te_precision_config_mixed.yaml")],
     OK + "megatron_bridge_mixed.yaml" + _BRIDGE_OVER + "fp8 hybrid, fp8_recipe tensorwise, BF16 layers [0, 3] "
     "of 4, fp8_param False; quant_recipe 5 matchers; no tensor_inspect [Megatron-Bridge "),
    ([os.path.join(G, "megatron_bridge_delayed_te2.12.yaml"), "4",
      "te_precision_config.yaml=" + os.path.join(G, "te_precision_config_delayed.yaml"),
      "nvdlfw_inspect.yaml=" + os.path.join(G, "nvdlfw_inspect_mixed_te2.4.yaml"),
      "decoder.layers.3.mlp.linear_fc2=bf16", "decoder.layers.2.self_attention.linear_proj=-"],
     OK + "megatron_bridge_delayed_te2.12.yaml" + _BRIDGE_OVER + "fp8 hybrid, fp8_recipe delayed, margin 1, "
     "history 1024, max, BF16 layers [] of 4, fp8_param False; quant_recipe 4 matchers, 2 module paths "
     "resolved as expected; tensor_inspect nvdlfw_inspect.yaml [Megatron-Bridge "),
    ([os.path.join(G, "megatron_bridge_block.yaml"), "4",
      "te_precision_config.yaml=" + os.path.join(G, "te_precision_config_block.yaml")],
     OK + "megatron_bridge_block.yaml" + _BRIDGE_OVER + "fp8 e4m3, fp8_recipe blockwise, BF16 layers [] of 4, "
     "fp8_param False; quant_recipe 2 matchers; no tensor_inspect [Megatron-Bridge "),
    ([os.path.join(G, "megatron_bridge_nvfp4.yaml"), "4",
      "te_precision_config.yaml=" + os.path.join(G, "te_precision_config_nvfp4.yaml"),
      "decoder.layers.0.mlp.linear_fc2=mxfp8_e4m3", "decoder.layers.2.self_attention.linear_proj=nvfp4"],
     OK + "megatron_bridge_nvfp4.yaml" + _BRIDGE_OVER + "fp8 None, fp4 e2m1, fp4_recipe nvfp4, BF16 layers [0, 3] "
     "of 4, fp8_param False; quant_recipe 5 matchers, 2 module paths resolved as expected; no tensor_inspect "
     "[Megatron-Bridge "),
    # Every GEMM BF16: fp8 None, so Megatron enters no FP8 autocast for any module.
    ([os.path.join(G, "megatron_bridge_all_bf16.yaml"), "4"],
     OK + "megatron_bridge_all_bf16.yaml" + _BRIDGE_OVER + "fp8 None, fp8_param False; no tensor_inspect "
     "[Megatron-Bridge "),
]

# The golden megatron_args.txt files with the te_precision_config.yaml each names.
GOLDEN_ARGS_ALL_BF16 = ([os.path.join(G, "megatron_args_all_bf16.txt")],
                        OK + "megatron_args_all_bf16.txt: 0 words parsed by Megatron; fp8=None: every module BF16")
GOLDEN_MEGATRON_ARGS = [
    ([os.path.join(G, "megatron_args_mixed.txt"), os.path.join(G, "te_precision_config_mixed.yaml")],
     OK + "megatron_args_mixed.txt: 11 words parsed by Megatron; fp8=hybrid fp8_recipe=tensorwise "
     "fp8_margin=0 fp8_amax_history_len=1 fp8_amax_compute_algo=most_recent fp8_wgrad=True "
     "first_last_layers_bf16=True num_layers_at_start_in_bf16=1 num_layers_at_end_in_bf16=1; "
     "quant_recipe from te_precision_config_mixed.yaml: 5 matchers"),
    ([os.path.join(G, "megatron_args_delayed.txt"), os.path.join(G, "te_precision_config_delayed.yaml")], OK),
    GOLDEN_ARGS_ALL_BF16,
    ([os.path.join(G, "megatron_args_block.txt"), os.path.join(G, "te_precision_config_block.yaml")], OK),
    # --fp4-format / --fp4-recipe: Megatron-Core 0.15+ (0.13 has no FP4 flags).
    ([os.path.join(G, "megatron_args_nvfp4.txt"), os.path.join(G, "te_precision_config_nvfp4.yaml")],
     OK + "megatron_args_nvfp4.txt: 11 words parsed by Megatron; fp4=e2m1 fp4_recipe=nvfp4 "
     "first_last_layers_bf16=True num_layers_at_start_in_bf16=1 num_layers_at_end_in_bf16=1; quant_recipe from "
     "te_precision_config_nvfp4.yaml: 5 matchers"),
]


# The three-tier plan (issue 39): NVFP4 for the rest, two modules in MXFP8, two in BF16.
GOLDEN_NVFP4_MODULES = (
    [os.path.join(G, "te_precision_config_nvfp4.yaml"),
     "decoder.layers.0.self_attention.linear_qkv=bf16", "decoder.layers.0.mlp.linear_fc2=mxfp8_e4m3",
     "decoder.layers.1.mlp.linear_fc1=mxfp8_e4m3", "decoder.layers.2.self_attention.linear_proj=nvfp4",
     "decoder.layers.3.mlp.linear_fc2=bf16", "decoder.layers.7.mlp.linear_fc1=nvfp4", "output_layer=nvfp4"],
    OK + "te_precision_config_nvfp4.yaml: 5 matchers, bf16[training]=bf16, nvfp4[training]=NVFP4BlockScaling, "
    "mxfp8_e4m3[training]=MXFP8BlockScaling; 7 module paths resolved as expected")


def _on_release(case, version):
    """case, its full OK line ending with the Megatron release that ran it."""
    args, expect = case
    return args, expect + " [Megatron %s]" % version if expect.startswith(OK) and expect != OK else expect


CASES = {
    "schema": ("check_schema.py", [
        ([SCHEMA, "schema/good_recipe.json"], OK),
        ([SCHEMA, "schema/bad_unknown_key.json"], "at /: Additional properties are not allowed ('extra' was unexpected)"),
        ([SCHEMA, "schema/bad_margin.json"], "at /recipe/margin: -1 is less than the minimum of 0"),
        (["schema/bad_not_2020.schema.json", "schema/good_recipe.json"], "$schema is not Draft 2020-12"),
        ([SCHEMA, "schema/missing.json"], "no such file"),
    ]),
    "recipe_json": ("check_schema.py", _recipe_json_cases()),
    "te": ("check_te_recipe.py", [
        (["te/good_delayed.json"], OK + "good_delayed.json builds recipe_type=DelayedScaling, margin=1, format=HYBRID, amax_history_len=1024"),
        (["te/good_current.json"], OK),
        (["te/bad_current_pow2_field.json"], "use_power_2_scales = true does not reach TE's modules"),
        (["te/good_block_fp32_env.json"], OK),
        (["te/good_mxfp8_flat.json"], OK),
        (["te/bad_unknown_key.json"], "unknown key 'history' for DelayedScaling (TE would ignore it)"),
        (["te/bad_margin.json"], "DelayedScaling.margin = -1: must be >= 0"),
        (["te/bad_history.json"], "DelayedScaling.amax_history_len = '16': expected an integer"),
        (["te/bad_e5m2.json"], "Float8CurrentScaling.fp8_format = 'E5M2': expected one of E4M3, HYBRID"),
        (["te/bad_f32_scales.json"], "use_f32_scales = true does not change TE's scales"),
        (["te/bad_block_dims.json"], "Only 1D or 2D blocks supported for w"),
        (["te/bad_class.json"], "class 'CustomRecipe': expected one of"),
    ]),
    "loader": ("check_loader.py", [
        ([], OK + "fp8a_recipe from "),
    ]),
    "megatron": ("check_megatron.py", [
        (["megatron/good_precision.yaml"] + MEGATRON_PATHS, OK),
        (["megatron/good_precision.yaml", "decoder.layers.1.mlp.linear_fc2=bf16"],
         "decoder.layers.1.mlp.linear_fc2 resolves to config 'tensorwise_hybrid', expected 'bf16'"),
        (["megatron/bad_matcher_not_enabled.yaml"], "matcher 'layer2_mlp' has no `enabled: true`"),
        (["megatron/bad_unknown_recipe_key.yaml"], "ValueError: Field 'fp8_margin' not valid"),
        (["megatron/bad_delayed.yaml"], "ValueError: Delayed scaling not in scope"),
        (["megatron/bad_format.yaml"], "ValueError: Unhandled fp8_format e5m2"),
        (["megatron/bad_dangling_config.yaml"], "matcher 'layer2_mlp' names config 'mxfp8_blocks', not in configs"),
        (["megatron/bad_regex_matcher.yaml"], "NotImplementedError: Match type 'regex' not implemented"),
    ]),
    "megatron_args": ("check_megatron_args.py", [
        (["megatron_args/good_args.txt"], OK),
        (["megatron_args/good_delayed.txt"], OK),
        (["megatron_args/good_output_proj.txt"], OK),
        (["megatron_args/bad_unknown_flag.txt"], "unrecognized arguments: --fp8-history-len 16"),
        (["megatron_args/bad_recipe_choice.txt"], "argument --fp8-format: invalid choice: 'e5m2'"),
        (["megatron_args/bad_delayed_bf16_layers.txt"], "Delayed scaling does not support first / last layer in BF16"),
    ]),
    "golden_megatron_args": ("check_megatron_args.py", GOLDEN_MEGATRON_ARGS),
    "golden_megatron": ("check_megatron.py", [
        ([os.path.join(G, "te_precision_config_mixed.yaml"),
          "decoder.layers.0.self_attention.linear_qkv=bf16", "decoder.layers.0.mlp.linear_fc2=bf16",
          "decoder.layers.1.mlp.linear_fc1=bf16", "decoder.layers.3.mlp.linear_fc2=bf16",
          "decoder.layers.13.mlp.linear_fc2=tensorwise_hybrid", "decoder.layers.0.mlp.linear_fc1=tensorwise_hybrid",
          "decoder.layers.2.self_attention.linear_proj=tensorwise_hybrid", "output_layer=tensorwise_hybrid"],
         OK + "te_precision_config_mixed.yaml: 5 matchers, bf16[training]=bf16, "
         "tensorwise_hybrid[training]=Float8CurrentScaling; 8 module paths resolved as expected"),
        ([os.path.join(G, "te_precision_config_modules.yaml"),
          "decoder.layers.0.self_attention.linear_qkv=mxfp8_e4m3", "decoder.layers.0.mlp.linear_fc2=bf16",
          "decoder.layers.1.mlp.linear_fc1=blockwise_hybrid", "decoder.layers.3.mlp.linear_fc2=mxfp8_e4m3",
          "decoder.layers.2.self_attention.linear_proj=tensorwise_hybrid", "output_layer=tensorwise_hybrid"],
         OK + "te_precision_config_modules.yaml: 5 matchers, bf16[training]=bf16, "
         "tensorwise_hybrid[training]=Float8CurrentScaling, mxfp8_e4m3[training]=MXFP8BlockScaling, "
         "blockwise_hybrid[training]=Float8BlockScaling; 6 module paths resolved as expected"),
        ([os.path.join(G, "te_precision_config_delayed.yaml"),
          "decoder.layers.3.mlp.linear_fc2=bf16", "decoder.layers.2.self_attention.linear_proj=-"],
         OK + "te_precision_config_delayed.yaml: 4 matchers, bf16[training]=bf16;"),
        ([os.path.join(G, "te_precision_config_all_bf16.yaml"),
          "decoder.layers.0.self_attention.linear_qkv=bf16", "decoder.layers.1.mlp.linear_fc2=bf16",
          "decoder.layers.7.mlp.linear_fc1=bf16", "output_layer=bf16"],
         OK + "te_precision_config_all_bf16.yaml: 1 matchers, bf16[training]=bf16; 4 module paths resolved as expected"),
        ([os.path.join(G, "te_precision_config_block.yaml"),
          "decoder.layers.1.mlp.linear_fc2=bf16", "decoder.layers.1.mlp.linear_fc1=blockwise_e4m3"],
         OK + "te_precision_config_block.yaml: 2 matchers, bf16[training]=bf16, "
         "blockwise_e4m3[training]=Float8BlockScaling;"),
        GOLDEN_NVFP4_MODULES,
    ]),
    "golden_nvdlfw": ("check_nvdlfw.py", [
        ([os.path.join(G, "nvdlfw_inspect_mixed.yaml"), "model.decoder.layers.1.self_attention.linear_qkv",
          "model.decoder.layers.1.mlp.linear_fc2", "model.decoder.layers.2.mlp.linear_fc1",
          "model.decoder.layers.3.self_attention.linear_proj", "model.decoder.layers.4.mlp.linear_fc2",
          "model.decoder.layers.14.mlp.linear_fc2"],
         OK + "nvdlfw_inspect_mixed.yaml: 5 sections parsed by nvdlfw_inspect, 6 layer names resolved"),
        ([os.path.join(G, "nvdlfw_inspect_delayed.yaml"), "model.decoder.layers.2.mlp.linear_fc1",
          "model.decoder.layers.4.mlp.linear_fc2"], OK),
        ([os.path.join(G, "nvdlfw_inspect_block.yaml"), "model.decoder.layers.2.mlp.linear_fc2",
          "model.decoder.layers.4.mlp.linear_fc2", "model.decoder.layers.1.self_attention.linear_qkv"],
         OK + "nvdlfw_inspect_block.yaml: 3 sections parsed by nvdlfw_inspect, 3 layer names resolved"),
        # NVFP4 (TE 2.13+): DisableQuantizationGEMM/Layer and LogNvfp4TensorStats.
        ([os.path.join(G, "nvdlfw_inspect_nvfp4.yaml"), "model.decoder.layers.1.self_attention.linear_qkv",
          "model.decoder.layers.2.mlp.linear_fc1", "model.decoder.layers.3.self_attention.linear_proj"],
         OK + "nvdlfw_inspect_nvfp4.yaml: 5 sections parsed by nvdlfw_inspect, 3 layer names resolved"),
    ]),
    # nvdlfw_inspect.yaml in a real wrapped Megatron GPTModel with TE's own debug features: the
    # plan of each golden (tests/reports/test_configs.cpp), written here from the test's specs.
    "megatron_model": ("check_megatron_model.py", [
        ([os.path.join(G, "nvdlfw_inspect_mixed.yaml"), "4",
          "decoder.layers.0.self_attention.linear_qkv=fprop,dgrad,wgrad:-",
          "decoder.layers.0.mlp.linear_fc2=fprop,dgrad,wgrad:-",
          "decoder.layers.1.mlp.linear_fc1=wgrad:activation,weight,gradient",
          "decoder.layers.2.self_attention.linear_proj=-:activation,weight,gradient",
          "decoder.layers.3.mlp.linear_fc2=fprop,dgrad,wgrad:-"],
         OK + "nvdlfw_inspect_mixed.yaml: 16 linear modules of DDP(Float16Module(GPTModel)), named "
         "model.module.module.decoder.layers.1.self_attention.linear_proj...; 10 GEMMs BF16, 2 modules logged"),
        ([os.path.join(G, "nvdlfw_inspect_modules.yaml"), "4",
          "decoder.layers.0.self_attention.linear_qkv=fprop,dgrad,wgrad:-",
          "decoder.layers.1.mlp.linear_fc2=fprop,dgrad,wgrad:-",
          "decoder.layers.2.mlp.linear_fc1=-:activation,weight,gradient",
          "decoder.layers.3.self_attention.linear_proj=-:activation,weight,gradient"],
         OK + "nvdlfw_inspect_modules.yaml: 16 linear modules of DDP(Float16Module(GPTModel)), named "
         "model.module.module.decoder.layers.1.self_attention.linear_proj...; 6 GEMMs BF16, 2 modules logged"),
        ([os.path.join(G, "nvdlfw_inspect_all_bf16.yaml"), "4", "*=fprop,dgrad,wgrad:-"],
         OK + "nvdlfw_inspect_all_bf16.yaml: 16 linear modules of DDP(Float16Module(GPTModel)), named "
         "model.module.module.decoder.layers.1.self_attention.linear_proj...; 48 GEMMs BF16, 0 modules logged"),
        (["nvdlfw/bad_anchored_model_prefix.yaml", "2", "decoder.layers.0.mlp.linear_fc2=fprop,dgrad,wgrad:-"],
         "decoder.layers.0.mlp.linear_fc2 (nvdlfw name model.module.module.decoder.layers.1.mlp.linear_fc2): "
         "BF16 GEMMs [], logged []; the plan says [fprop,dgrad,wgrad], []"),
    ]),
    "golden_torchao": ("check_torchao.py", [
        ([os.path.join(G, "torchao_mixed.json")],
         OK + "torchao_mixed.json: torchao recipe tensorwise, 4 modules kept high precision, 1 converted"),
        ([os.path.join(G, "torchao_all_bf16.json")], OK + "torchao_all_bf16.json: no torchao recipe (the plan keeps no GEMM in FP8"),
        ([os.path.join(G, "torchao_delayed.json")], OK + "torchao_delayed.json: no torchao recipe (the advice is delayed"),
        ([os.path.join(G, "torchao_block.json")],
         OK + "torchao_block.json: torchao recipe rowwise, 1 modules kept high precision, 1 converted"),
        ([os.path.join(G, "torchao_block_gw_hp.json")],
         OK + "torchao_block_gw_hp.json: torchao recipe rowwise_with_gw_hp, 1 modules kept high precision"),
    ]),
    # The oldest release docs/VERSIONS.md claims, TE 2.4 (its sources in the venv's
    # share/fp8a/te-2.4): the files fp8-advisor writes for --te-version 2.4 load there, and the
    # newest form does not (DisableQuantizationGEMM is TE 2.13+).
    "te_oldest": ("check_nvdlfw.py", [
        ([os.path.join(G, "nvdlfw_inspect_mixed_te2.4.yaml"), "model.decoder.layers.1.self_attention.linear_qkv",
          "model.decoder.layers.2.mlp.linear_fc2"],
         OK + "nvdlfw_inspect_mixed_te2.4.yaml: 5 sections parsed by nvdlfw_inspect, 2 layer names resolved"),
        ([os.path.join(G, "nvdlfw_inspect_mixed.yaml")],
         "Could not find feature 'DisableQuantization"),
        ([os.path.join(G, "recipe_pow2_te2.4.json")], OK, "check_te_recipe.py"),
        # log-config for TE 2.4: underflows% of the training recipe alone; the newest plan is refused.
        ([os.path.join(G, "log_config_delayed_te2.4.yaml"), "fp8_delayed_scaling", "90"],
         OK + "log_config_delayed_te2.4.yaml: 2 features, 4 statistics accepted by TE's own checks "
         "(fp8_delayed_scaling, sm_90); X, W, dY logged at 9 of 60 steps", "check_log_config.py"),
        ([os.path.join(G, "log_config_delayed_h100.yaml"), "fp8_delayed_scaling", "90"],
         "fp8_delayed_scaling_underflows%: not among TE's statistics", "check_log_config.py"),
        ([os.path.join(G, "te_snippet_block_te2.4.py")],
         OK + "te_snippet_block_te2.4.py: te.fp8_autocast(enabled, fp8_recipe) with Float8BlockScaling",
         "check_te_snippet.py"),
        ([os.path.join(G, "te_snippet_block.py")], "te.autocast: not in TE's transformer_engine.pytorch",
         "check_te_snippet.py"),
    ]),
    # Megatron-Core 0.16.1, the oldest release with --te-precision-config-file (its sources in the
    # venv's share/fp8a/megatron-0.16.1): the per-module files load and resolve there too.
    "megatron_oldest": ("check_megatron.py", [
        ([os.path.join(G, "te_precision_config_mixed.yaml"),
          "decoder.layers.0.self_attention.linear_qkv=bf16", "decoder.layers.3.mlp.linear_fc2=bf16",
          "decoder.layers.0.mlp.linear_fc1=tensorwise_hybrid", "output_layer=tensorwise_hybrid"],
         OK + "te_precision_config_mixed.yaml: 5 matchers, bf16[training]=bf16, "
         "tensorwise_hybrid[training]=Float8CurrentScaling; 4 module paths resolved as expected "
         "[Megatron-Core 0.16.1]"),
        ([os.path.join(G, "te_precision_config_modules.yaml"),
          "decoder.layers.0.self_attention.linear_qkv=mxfp8_e4m3", "decoder.layers.1.mlp.linear_fc1=blockwise_hybrid"],
         OK + "te_precision_config_modules.yaml: 5 matchers, bf16[training]=bf16, "
         "tensorwise_hybrid[training]=Float8CurrentScaling, mxfp8_e4m3[training]=MXFP8BlockScaling, "
         "blockwise_hybrid[training]=Float8BlockScaling; 2 module paths resolved as expected [Megatron-Core 0.16.1]"),
        ([os.path.join(G, "te_precision_config_all_bf16.yaml"), "decoder.layers.7.mlp.linear_fc1=bf16"],
         OK + "te_precision_config_all_bf16.yaml: 1 matchers, bf16[training]=bf16; 1 module paths resolved "
         "as expected [Megatron-Core 0.16.1]"),
        (GOLDEN_NVFP4_MODULES[0], GOLDEN_NVFP4_MODULES[1] + " [Megatron-Core 0.16.1]"),
    ]),
    # megatron_args.txt on the oldest releases docs/VERSIONS.md claims for its flags, each with its
    # own argument parser (megatron-lm/<tag>/) and megatron/core (the venv's share/fp8a): 0.13.1
    # parses the FP8 flags and not the newer ones; 0.16.1 adds --te-precision-config-file.
    "megatron_args_0.13": ("check_megatron_args.py", [
        (["megatron_args/good_args.txt"],
         OK + "good_args.txt: 9 words parsed by Megatron; fp8=hybrid fp8_recipe=tensorwise fp8_margin=0 "
         "fp8_amax_history_len=1 fp8_amax_compute_algo=most_recent fp8_wgrad=True first_last_layers_bf16=True "
         "num_layers_at_start_in_bf16=1 num_layers_at_end_in_bf16=2 [Megatron 0.13.1]"),
        (["megatron_args/good_delayed.txt"], OK),
        _on_release(GOLDEN_ARGS_ALL_BF16, "0.13.1"),
        (["megatron_args/bad_delayed_bf16_layers.txt"], "Delayed scaling does not support first / last layer in BF16"),
        ([os.path.join(G, "megatron_args_mixed.txt"), os.path.join(G, "te_precision_config_mixed.yaml")],
         "unrecognized arguments: --te-precision-config-file te_precision_config.yaml"),
        (["megatron_args/good_output_proj.txt"], "unrecognized arguments: --fp8-output-proj"),
    ]),
    "megatron_args_0.16": ("check_megatron_args.py", [_on_release(c, "0.16.1") for c in GOLDEN_MEGATRON_ARGS] + [
        (["megatron_args/good_args.txt"], OK),
        (["megatron_args/good_output_proj.txt"], "unrecognized arguments: --fp8-output-proj"),
    ]),
    # megatron_bridge.yaml through Megatron-Bridge 0.3.1's own override code (FP8A_BRIDGE_SRC), on
    # Megatron-Core 0.16.1 (Bridge 0.3 pins < 0.17); bridge_oldest: the same on Bridge 0.3.0.
    "bridge": ("check_bridge.py", BRIDGE_CASES + [
        (["bridge/bad_plain_mixed_precision.yaml", "4", "te_precision_config.yaml=" + os.path.join(G, "te_precision_config_mixed.yaml"),
          "nvdlfw_inspect.yaml=" + os.path.join(G, "nvdlfw_inspect_mixed_te2.4.yaml")],
         "mixed_precision is a dict, not Bridge's MixedPrecisionConfig"),
        (["bridge/bad_unknown_field.yaml", "4", "te_precision_config.yaml=" + os.path.join(G, "te_precision_config_mixed.yaml"),
          "nvdlfw_inspect.yaml=" + os.path.join(G, "nvdlfw_inspect_mixed_te2.4.yaml")],
         "Dropping unexpected config keys for target 'megatron.bridge.training.mixed_precision.MixedPrecisionConfig': "
         "['fp8_recipes']"),
        (["bridge/bad_delayed_first_last.yaml", "4", "te_precision_config.yaml=" + os.path.join(G, "te_precision_config_delayed.yaml"),
          "nvdlfw_inspect.yaml=" + os.path.join(G, "nvdlfw_inspect_mixed_te2.4.yaml")],
         "Delayed scaling does not support first / last layer in BF16"),
        # The TE 2.20 form of nvdlfw_inspect.yaml under Bridge's TE pin (< 2.13); a missing file.
        ([os.path.join(G, "megatron_bridge_mixed_te2.12.yaml"), "4",
          "te_precision_config.yaml=" + os.path.join(G, "te_precision_config_mixed.yaml"),
          "nvdlfw_inspect.yaml=" + os.path.join(G, "nvdlfw_inspect_mixed.yaml")],
         "uses DisableQuantizationGEMM, DisableQuantizationLayer, TE 2.13+ names; Megatron-Bridge requires "
         "transformer-engine<2.13.0,>=2.10.0a0"),
        ([os.path.join(G, "megatron_bridge_mixed.yaml"), "4"],
         "Failed to instantiate quant_recipe from _target_: Error in call to target "
         "'megatron.core.quantization.utils.load_quantization_recipe': FileNotFoundError"),
    ]),
    "bridge_oldest": ("check_bridge.py", BRIDGE_CASES),
    # te_snippet.py run against TE 2.20's recipe classes and te.autocast's signature.
    "te_snippet": ("check_te_snippet.py", [
        ([os.path.join(G, "te_snippet_block.py")],
         OK + "te_snippet_block.py: te.autocast(enabled, recipe) with Float8BlockScaling; env "
         "NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1"),
        ([os.path.join(G, "te_snippet_delayed.py")],
         OK + "te_snippet_delayed.py: te.autocast(enabled, recipe) with DelayedScaling"),
        ([os.path.join(G, "te_snippet_all_bf16.py")], OK + "te_snippet_all_bf16.py: BF16, no autocast"),
        ([os.path.join(G, "te_snippet_nvfp4.py")],
         OK + "te_snippet_nvfp4.py: te.autocast(enabled, recipe) with NVFP4BlockScaling"),
        (["te_snippet/bad_keyword.py"], "te.autocast(enabled, fp8_recipe): TE's transformer_engine.pytorch.quantization.autocast takes no fp8_recipe"),
        (["te_snippet/bad_recipe_field.py"], "DelayedScaling(history=...): TE's DelayedScaling has no field history"),
    ]),
    # log-config's YAML (tests/reports/test_log_config.cpp) against nvdlfw_inspect and TE 2.20's own
    # feature checks, for the training recipe and GPU each was planned for; a plan for an H100 is
    # refused on an A100 (block-scaling what-ifs need sm_90).
    "golden_log_config": ("check_log_config.py", [
        ([os.path.join(G, "log_config_current_h100.yaml"), "fp8_current_scaling", "90"],
         OK + "log_config_current_h100.yaml: 2 features, 11 statistics accepted by TE's own checks"),
        ([os.path.join(G, "log_config_mxfp8_b200.yaml"), "mxfp8", "100"],
         OK + "log_config_mxfp8_b200.yaml: 2 features, 15 statistics accepted"),
        ([os.path.join(G, "log_config_delayed_h100.yaml"), "fp8_delayed_scaling", "90"],
         OK + "log_config_delayed_h100.yaml: 2 features, 14 statistics accepted"),
        ([os.path.join(G, "log_config_nvfp4_b200.yaml"), "nvfp4", "100"],
         OK + "log_config_nvfp4_b200.yaml: 3 features, 15 statistics accepted"),
        ([os.path.join(G, "log_config_bf16.yaml"), "", "90"],
         OK + "log_config_bf16.yaml: 1 features, 3 statistics accepted"),
        ([os.path.join(G, "log_config_current_h100.yaml"), "fp8_current_scaling", "80"],
         "fp8_block_scaling_underflows%: TE refuses it: Stat fp8_block_scaling_underflows% needs Hopper"),
    ]),
    "nvdlfw": ("check_nvdlfw.py", [
        (["nvdlfw/good_debug.yaml"] + NVDLFW_LAYERS, OK),
        (["nvdlfw/bad_unknown_feature.yaml"], "Could not find feature 'DisableQuantizationGem' in namespace 'transformer_engine'"),
        (["nvdlfw/bad_no_enabled.yaml"], "Missing required config field `enabled` under fallback_layer1"),
        (["nvdlfw/bad_gemm_name.yaml"], "DisableQuantizationGEMM.gemms 'wgard': expected one of dgrad, fprop, wgrad"),
        (["nvdlfw/bad_no_stats.yaml"], "LogTensorStats.stats must be a non-empty list"),
        (["nvdlfw/bad_overlap.yaml"] + NVDLFW_LAYERS, "Found multiple debug configs targeting the same layer(s): model.decoder.layers.2.mlp.linear_fc2"),
        (["nvdlfw/missing.yaml"], "no such file"),
    ]),
    "torchao": ("check_torchao.py", [
        (["torchao/good_rowwise.json"], OK + "good_rowwise.json: torchao recipe rowwise, 4 modules kept high precision, 2 converted"),
        # proj is not out_proj; a wrapper's copy is the same module; layers.00 is another name.
        (["torchao/good_dot_boundary.json"],
         OK + "good_dot_boundary.json: torchao recipe tensorwise, 2 modules kept high precision, 2 converted"),
        (["torchao/good_tensorwise_nomodules.json"], OK),
        (["torchao/good_none.json"], OK),
        (["torchao/bad_recipe_name.json"], "recipe_name mxfp8 not in valid names"),
        (["torchao/bad_unknown_key.json"], "unknown key 'emulate'"),
        (["torchao/bad_filter_matches_nothing.json"], "filter_fqns entry 'layers.7.' matches no module"),
        (["torchao/bad_none_without_reason.json"], "recipe_name is null without a reason"),
    ]),
}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    consumer, venv = sys.argv[1], os.path.abspath(sys.argv[2])
    python = os.path.join(venv, "bin", "python")
    if not os.access(python, os.X_OK):
        print("SKIPPED: no consumer venv at %s; create it with `bash scripts/consumers-env.sh`" % venv)
        return 77
    checker, cases = CASES[consumer]
    if consumer == "recipe_json" and len(RECIPE_GOLDENS) < 6:
        print("FAIL: expected the 6 golden recipe_*.json files, found %d" % len(RECIPE_GOLDENS))
        return 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVTE_") and k not in ("FP8A_TE_SRC", "FP8A_MEGATRON_SRC", "FP8A_MEGATRON_PARSER", "FP8A_BRIDGE_SRC")}
    older = {"megatron_oldest": "0.16.1", "megatron_args_0.13": "0.13.1", "megatron_args_0.16": "0.16.1"}
    if consumer in older:
        env["FP8A_MEGATRON_SRC"] = os.path.join(venv, "share", "fp8a", "megatron-" + older[consumer])
        if not os.path.isdir(env["FP8A_MEGATRON_SRC"]):
            print("FAIL: no Megatron-Core %s sources at %s: run `bash scripts/consumers-env.sh`"
                  % (older[consumer], env["FP8A_MEGATRON_SRC"]))
            return 1
        if consumer.startswith("megatron_args_"):
            env["FP8A_MEGATRON_PARSER"] = os.path.join(HERE, "megatron-lm", "core_v" + older[consumer])
    if consumer in ("bridge", "bridge_oldest"):
        version = "0.3.1" if consumer == "bridge" else "0.3.0"
        env["FP8A_BRIDGE_SRC"] = os.path.join(venv, "share", "fp8a", "megatron-bridge-" + version)
        env["FP8A_MEGATRON_SRC"] = os.path.join(venv, "share", "fp8a", "megatron-0.16.1")
        for d in (env["FP8A_BRIDGE_SRC"], env["FP8A_MEGATRON_SRC"]):
            if not os.path.isdir(d):
                print("FAIL: no %s: run `bash scripts/consumers-env.sh`" % d)
                return 1
        cases = [(c[0], c[1] + version) if c[1].endswith("[Megatron-Bridge ") else c for c in cases]
    if consumer == "te_oldest":
        env["FP8A_TE_SRC"] = os.path.join(venv, "share", "fp8a", "te-2.4")
        if not os.path.isdir(env["FP8A_TE_SRC"]):
            print("FAIL: no TE 2.4 sources at %s: run `bash scripts/consumers-env.sh`" % env["FP8A_TE_SRC"])
            return 1
    env["TORCH_CPP_LOG_LEVEL"] = "ERROR"
    # The cases run as forks of one process that imported the heavy modules once (forkserver.py):
    # torch, and Megatron-Core where the checkers import the venv's own (not FP8A_MEGATRON_SRC's).
    preload = ["torch"] if any(c in (checker,) + tuple(case[2] for case in cases if len(case) > 2)
                               for c in HEAVY_CHECKERS) else []
    if preload and "FP8A_MEGATRON_SRC" not in env and checker.startswith("check_megatron"):
        preload.append("megatron.core")
    server = subprocess.Popen([python, os.path.join(HERE, "forkserver.py")] + preload, cwd=S, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    passed = failed = 0
    for case in cases:
        args, expect = case[0], case[1]
        case_checker = case[2] if len(case) > 2 else checker
        args = [a if a.startswith("/") or "=" in a or not a.endswith((".json", ".yaml", ".txt", ".py"))
                else os.path.join(S, a) for a in args]
        server.stdin.write(json.dumps([os.path.join(HERE, case_checker)] + args) + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
        if not answer:
            print("FAIL forkserver.py ended (rc %s) before answering %s" % (server.wait(), case_checker))
            return 1
        p = json.loads(answer)
        lines = p["stdout"].strip().splitlines()
        last = lines[-1] if lines else ""
        want_ok = expect.startswith(OK)
        good = (p["rc"] == 0 and last.startswith(expect)) if want_ok else \
               (p["rc"] == 1 and last.startswith("FAIL: ") and expect in last)
        shown = " ".join(os.path.relpath(a, S) if a.startswith(S) else a for a in args)
        if good and len(lines) == 1:
            passed += 1
            print("ok   %s %s\n     %s" % (case_checker, shown, last[:300]))
        else:
            failed += 1
            print("FAIL %s %s: rc %d, expected %r\n  stdout: %s\n  stderr: %s"
                  % (case_checker, shown, p["rc"], expect, p["stdout"].strip(), p["stderr"].strip()[-2000:]))
    server.stdin.close()
    server.wait()
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
