"""The outcome harness: trains scripts/make_real_capture.py's char-GPT with every block Linear's
GEMMs under an emulated Transformer Engine FP8 recipe (fp8emu.py), or under BF16 autocast as the
baseline, and records the loss curves and captures of what the run saw.

One run = one configuration (a dict, ``RunConfig``): the model and data options of
make_real_capture.py, the batch-order seed, the thread count, the recipe and format, per-layer
and per-GEMM BF16 fallbacks, and the case's mechanism (``gain``). Runs are cached under
calibration/runs/<hash of the config>/ (``result.json`` marks a finished run: rerunning skips it;
an unfinished run starts over).

Emulation (the harness's ``Fp8Linear``): under autocast X and W are cast to BF16 as for any GEMM;
then, as TE does, each GEMM quantises its own operand copies: fprop X and W rowwise; dgrad dY
rowwise and W columnwise; wgrad dY and X columnwise (the copies differ for 1-D block scales only),
multiplies the dequantised values in fp32 and returns BF16. A GEMM listed in the fallbacks uses its
BF16 operands unquantised. Delayed scaling keeps one amax history per (layer, role) as TE does
(``fp8emu.DelayedScale``: the scale of step t from the amaxes of steps before t; one step = one
optimizer step, its amax the max over the micro-batches). The output layer stays in BF16 (as in
Megatron's FP8 training, where it is not a TE Linear).

Mechanisms (``gain``), each exact in BF16 (powers of two, no overflow), so that the BF16 baseline
trains the same function: ``outlier``: the FC2 input of one layer is multiplied by 2^g at token
position 0 and its output divided back (the massive activations of attention-sink tokens feeding
the down projection); ``ramp``: the whole FC2 input is multiplied by 2^k, k growing by
one binade every `every` steps from step `start`, `binades` in all (an amax that
doubles faster than a delayed history follows); ``spike``: the whole FC2 input is multiplied by
2^g for `len` steps from step `start`, then by 1 again (an activation spike that a delayed
history of the maximum remembers long after it ends). The layer's FC2 has no bias
in these cases (so that the division is exact).

  nice -n 10 build/consumers-venv/bin/python calibration/harness.py --lr 1e-3 \\
      --recipe current --format hybrid --seed-offset 0
"""

import argparse
import copy
import hashlib
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(REPO, "python")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fp8emu  # noqa: E402
import char_gpt  # noqa: E402  (the model, corpus and schedule of the real captures)

RUNS = os.path.join(HERE, "runs")
GEMMS = ("fprop", "dgrad", "wgrad")
# Which operand copies each GEMM quantises (TE): (role, orientation) of its two inputs.
GEMM_OPERANDS = {"fprop": (("activation", "rowwise"), ("weight", "rowwise")),
                 "dgrad": (("gradient", "rowwise"), ("weight", "columnwise")),
                 "wgrad": (("gradient", "columnwise"), ("activation", "columnwise"))}

DEFAULTS = {
    "steps": 100, "lr": 1e-3, "warmup": 10, "clip": 1.0, "min_lr_ratio": 0.1,
    "weight_decay": 0.1, "beta2": 0.95, "layers": 2, "d_model": 64, "heads": 4, "seq": 64,
    "micro_batch": 2, "accum": 2, "seed": 1234, "seed_offset": 0, "threads": 1,
    "eval_every": 25, "eval_seqs": 16,
    "recipe": "bf16", "format": "hybrid",
    "fallback": [],  # ["layers.1.mlp.linear_fc2"] or ["layers.1.mlp.linear_fc2:wgrad"]
    "override": {},  # {"layers.1.mlp.linear_fc2": "mxfp8"}: another recipe for a layer or layer:gemm
    "gain": None,  # {"kind": "outlier", "layer": 1, "log2": 12} / {"kind": "ramp", "layer": 1,
    #                "start": 60, "every": 2, "binades": 12}
    # A mechanism that is not planted (issue 58): one fc1 unit trained `lr_mult` times faster,
    # without weight decay: {"layer": 1, "unit": 0, "lr_mult": 30}. Nothing is multiplied in the
    # forward pass; whether the unit (the FC2 input's channel `unit`) grows is up to training.
    "free_unit": None,
    "capture_steps": [],
    "hook_regex": r"^(layers\.0\.self_attention\.linear_qkv|layers\.1\.mlp\.linear_fc2)$",
}


# Keys added after runs were stored: left out of the hash while at their default, so that those
# runs keep their hashes.
LATER_KEYS = ("override", "free_unit")


def config_hash(cfg):
    """Hash of everything that changes the run's numbers (capture choices excluded)."""
    key = {k: v for k, v in sorted(cfg.items()) if k not in ("capture_steps", "hook_regex")
           and not (k in LATER_KEYS and v == DEFAULTS[k])}
    key["torch"] = torch.__version__
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def run_dir(cfg):
    return os.path.join(RUNS, config_hash(cfg))


# ---- the emulated Linear ----------------------------------------------------------------------

BF16 = fp8emu.Recipe("bf16")  # the recipe of a fallback GEMM


class Emulation(object):
    """The recipe of one run, the layers and GEMMs under another recipe (``override``, e.g. MXFP8
    for what NVFP4 cannot carry) or in BF16 (``fallback``), the per-(layer, role) delayed-scaling
    state and the stochastic rounding stream (one seed per quantised NVFP4 gradient copy, in call
    order: a fresh draw every time, as TE's Philox offsets advance)."""

    def __init__(self, recipe, fmt, fallback, override=None):
        self.recipe = fp8emu.Recipe(recipe)
        self.format = fmt
        self.fallback = set(fallback)
        self.override = {k: fp8emu.Recipe(v) for k, v in (override or {}).items()}
        if any(r.kind == "delayed" for r in self.override.values()):
            raise ValueError("override: delayed scaling only as the run's recipe")
        self.delayed = {}  # (layer, role) -> fp8emu.DelayedScale
        self.draws = 0
        # Weight copies: (layer, gemm, orientation) -> (the BF16 weight, its scale, the copy).
        # A weight is unchanged between optimizer steps, so its micro-batches and, under NVFP4's
        # 16x16 tiles, its two orientations (the same blocks) reuse one quantisation.
        self.weights = {}

    def recipe_for(self, layer, gemm):
        """The recipe GEMM `gemm` of `layer` runs under (bf16: its operands unquantised)."""
        if layer in self.fallback or "%s:%s" % (layer, gemm) in self.fallback:
            return BF16
        return self.override.get("%s:%s" % (layer, gemm), self.override.get(layer, self.recipe))

    def is_fp8(self, layer, gemm):
        return self.recipe_for(layer, gemm).kind != "bf16"

    def observe(self, layer, role, x):
        """Delayed scaling: record the tensor's amax for the history (every micro-batch)."""
        if self.recipe.kind == "delayed":
            key = (layer, role)
            if key not in self.delayed:
                dtype = fp8emu.role_dtype(self.format, role)
                self.delayed[key] = fp8emu.DelayedScale(self.recipe, fp8emu.FP8[dtype][1])
            self.delayed[key].observe(x)

    def operand(self, layer, gemm, role, orientation, x):
        """The operand copy GEMM `gemm` of `layer` consumes: dequantised FP8 or the BF16 input."""
        recipe = self.recipe_for(layer, gemm)
        if recipe.kind == "bf16":
            return fp8emu.view_2d(x).float()
        scale = self.delayed[(layer, role)].scale if recipe.kind == "delayed" else None
        seed = None
        if recipe.kind == "nvfp4" and role == "gradient" and recipe.sr:
            self.draws += 1
            seed = fp8emu.NVFP4_SEED_BASE + 0x1000 * self.draws
        if role != "weight":
            return fp8emu.quantize(x, recipe, fp8emu.role_dtype(self.format, role), role,
                                   orientation, scale, seed, stats=False).deq
        # Deterministic (weights are never stochastically rounded): the same BF16 values and
        # scale give the same copy bit for bit.
        same_blocks = recipe.kind == "nvfp4" and recipe.two_d
        key = (layer, recipe.spec, "rowwise" if same_blocks else orientation)
        hit = self.weights.get(key)
        if hit is not None and hit[1] is scale and torch.equal(hit[0], x):
            return hit[2]
        deq = fp8emu.quantize(x, recipe, fp8emu.role_dtype(self.format, role), role,
                              orientation, scale, seed, stats=False).deq
        self.weights[key] = (x.detach().clone(), scale, deq)
        return deq

    def end_step(self):
        for d in self.delayed.values():
            d.end_step()


class _Fp8LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, emu, layer):
        ctx.save_for_backward(x, w)
        ctx.emu, ctx.layer, ctx.has_bias = emu, layer, b is not None
        emu.observe(layer, "activation", x)
        emu.observe(layer, "weight", w)
        with torch.autocast("cpu", enabled=False):
            xq = emu.operand(layer, "fprop", "activation", "rowwise", x)
            wq = emu.operand(layer, "fprop", "weight", "rowwise", w)
            y = xq @ wq.t()
            if b is not None:
                y = y + b.float()
        return y.to(torch.bfloat16).reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        emu, layer = ctx.emu, ctx.layer
        gy = gy.to(torch.bfloat16)  # dY as the GEMMs receive it (BF16, as the output)
        emu.observe(layer, "gradient", gy)
        with torch.autocast("cpu", enabled=False):
            g_row = emu.operand(layer, "dgrad", "gradient", "rowwise", gy)
            w_col = emu.operand(layer, "dgrad", "weight", "columnwise", w)
            dx = (g_row @ w_col).to(torch.bfloat16).reshape(x.shape)
            g_col = emu.operand(layer, "wgrad", "gradient", "columnwise", gy)
            x_col = emu.operand(layer, "wgrad", "activation", "columnwise", x)
            dw = (g_col.t() @ x_col).to(w.dtype)
            db = fp8emu.view_2d(gy).float().sum(0).to(torch.bfloat16) if ctx.has_bias else None
        return dx, dw, db, None, None


class Fp8Linear(torch.nn.Linear):
    """nn.Linear whose GEMMs run through the run's Emulation (set as .emu and .layer_name)."""

    def forward(self, x):
        b = None if self.bias is None else self.bias.to(torch.bfloat16)
        return _Fp8LinearFn.apply(x.to(torch.bfloat16), self.weight.to(torch.bfloat16), b,
                                  self.emu, self.layer_name)


def emulate(model, emu):
    """Every Linear of the transformer layers goes through emu (the output layer stays BF16)."""
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name.startswith("layers."):
            mod.__class__ = Fp8Linear
            mod.emu, mod.layer_name = emu, name


def gain_log2(gain, step):
    """The mechanism's exponent at `step` (0 without a ramp)."""
    if gain["kind"] == "outlier":
        return gain["log2"]
    if gain["kind"] == "spike":
        return gain["log2"] if gain["start"] <= step < gain["start"] + gain["len"] else 0
    if step < gain["start"]:
        return 0
    return min((step - gain["start"]) // gain["every"] + 1, gain["binades"])


def apply_gain(model, gain, state):
    """Route the FC2 input of one layer (``layer``: an index, or a list of them) through the
    mechanism's power-of-two gain (see the docstring). state["step"] is the current optimizer step."""
    layers = gain["layer"] if isinstance(gain["layer"], list) else [gain["layer"]]
    for i in layers:
        _gain_layer(model.layers[i].mlp, gain, state)


def _gain_layer(mlp, gain, state):
    fc2 = mlp.linear_fc2
    fc2.register_parameter("bias", None)

    def forward(x):
        h = F.gelu(mlp.linear_fc1(x))
        e = gain_log2(gain, state["step"])
        if gain["kind"] == "outlier":
            g = torch.ones(1, h.shape[1], 1, dtype=h.dtype)
            g[:, 0] = 2.0 ** e
        else:
            g = torch.full((), 2.0 ** e, dtype=h.dtype)
        return fc2(h * g) / g

    mlp.forward = forward


# ---- one run ------------------------------------------------------------------------------------

def train(cfg, log=print):
    """Train one configuration (cached): returns the result dict (also in result.json)."""
    out = run_dir(cfg)
    done = os.path.join(out, "result.json")
    if os.path.exists(done):
        with open(done) as f:
            return json.load(f)
    os.makedirs(out, exist_ok=True)
    for old in os.listdir(out):  # an unfinished run starts over
        os.remove(os.path.join(out, old))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)
    import fp8a_capture

    a = char_gpt.parse_args(["--run-name", "harness", "--out", out])
    for k in ("steps", "lr", "warmup", "clip", "min_lr_ratio", "weight_decay", "beta2", "layers",
              "d_model", "heads", "seq", "micro_batch", "accum", "seed", "threads"):
        setattr(a, k, cfg[k])
    torch.set_num_threads(cfg["threads"])
    torch.use_deterministic_algorithms(True)
    files, data, sha = char_gpt.load_corpus(a)
    train_tok, held = char_gpt.split_tokens(torch, a, data)

    torch.manual_seed(a.seed)
    model = char_gpt.build_model(torch, a)
    state = {"step": 0}
    if cfg["gain"]:
        apply_gain(model, cfg["gain"], state)
    eval_model = copy.deepcopy(model)
    if cfg["gain"]:
        apply_gain(eval_model, cfg["gain"], state)
    emu = Emulation(cfg["recipe"], cfg["format"], cfg["fallback"], cfg["override"])
    if emu.recipe.kind != "bf16" or emu.override:
        emulate(model, emu)
        emulate(eval_model, emu)
    opt = char_gpt.make_optimizer(torch, model, a)
    gen = torch.Generator().manual_seed(a.seed + 1 + 1000 * cfg["seed_offset"])  # batch order
    heldgen = torch.Generator().manual_seed(a.seed + 2)  # the same held-out batch for every run

    def batch(src, n, g):
        return char_gpt.sample_batch(torch, src, n, g, a, "cpu")

    held_x, held_y = batch(held, cfg["eval_seqs"], heldgen)

    def heldout_loss():
        """Held-out loss of the model as trained (the same emulation; the delayed state is only
        read: eval forwards do not enter the amax history)."""
        eval_model.load_state_dict(model.state_dict())
        saved = emu.observe
        emu.observe = lambda *args: None
        try:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                logits = eval_model(held_x)
        finally:
            emu.observe = saved
        return F.cross_entropy(logits.float().reshape(-1, 256), held_y.reshape(-1)).item()

    cap = fp8a_capture.attach(model, out, steps=cfg["capture_steps"], name_regex=cfg["hook_regex"])
    rows, t0 = [], time.time()
    for step in range(a.steps):
        state["step"] = step
        lr = char_gpt.lr_at(a, step)
        for grp in opt.param_groups:
            grp["lr"] = lr
        total = 0.0
        for _ in range(a.accum):
            x, y = batch(train_tok, a.micro_batch, gen)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(x)
            loss = F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
            (loss / a.accum).backward()
            total += loss.item()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                     a.clip if a.clip > 0 else float("inf")))
        free = free_unit_rows(model, cfg["free_unit"])
        opt.step()
        if free:
            release_unit(free, lr * a.weight_decay, cfg["free_unit"]["lr_mult"])
        opt.zero_grad(set_to_none=True)
        cap.step()
        if step in cfg["capture_steps"] and emu.delayed:  # the scales this step quantised with
            with open(os.path.join(out, "delayed_scales.csv"), "a") as f:
                if f.tell() == 0:
                    f.write("step,tensor,scale\n")
                for (layer, role), d in sorted(emu.delayed.items()):
                    f.write("%d,%s.%s,%r\n" % (step, layer, role, float(d.scale)))
        emu.end_step()
        hl = None
        if step % cfg["eval_every"] == 0 or step == a.steps - 1:
            hl = heldout_loss()
        rows.append((step, total / a.accum, gnorm, lr, hl))
        if step % 50 == 0 or step == a.steps - 1:
            log("  step %4d loss %.4f heldout %s (%.2f s/step)"
                % (step, total / a.accum, "-" if hl is None else "%.4f" % hl,
                   (time.time() - t0) / (step + 1)))
    cap.detach()
    with open(os.path.join(out, "loss.csv"), "w") as f:
        f.write("step,loss,grad_norm,lr,heldout_loss\n")
        for step, l, g, lr, hl in rows:
            f.write("%d,%r,%r,%r,%s\n" % (step, l, g, lr, "" if hl is None else repr(hl)))
    half = [r[1] for r in rows[len(rows) // 2:]]
    finite = all(math.isfinite(r[1]) for r in rows)
    result = {"hash": config_hash(cfg), "config": cfg, "final_val_loss": rows[-1][4],
              "mean_train_loss_2nd_half": sum(half) / len(half), "finite": finite,
              "seconds": round(time.time() - t0, 1), "s_per_step": round((time.time() - t0) / a.steps, 4),
              "torch": torch.__version__, "corpus_sha256": sha,
              "delayed_scales": {"%s.%s" % k: float(d.scale) for k, d in sorted(emu.delayed.items())}}
    with open(done + ".tmp", "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    os.replace(done + ".tmp", done)
    return result


def free_unit_rows(model, free):
    """The free unit's fc1 weight row and bias before the optimizer step: [(param, index, copy)]."""
    if not free:
        return []
    fc1 = model.layers[free["layer"]].mlp.linear_fc1
    u = free["unit"]
    return [(fc1.weight, u, fc1.weight.data[u].clone()), (fc1.bias, u, fc1.bias.data[u].clone())]


def release_unit(rows, lr_wd, mult):
    """After AdamW's step p1 = p0 (1 - lr wd) + d (decay only on the weight matrix): the row
    becomes p0 + mult * d, no decay and mult times Adam's step."""
    for p, u, old in rows:
        decayed = old * (1.0 - lr_wd) if p.dim() == 2 else old
        p.data[u] = old + mult * (p.data[u] - decayed)


def make_config(**over):
    cfg = copy.deepcopy(DEFAULTS)
    for k, v in over.items():
        if k not in cfg:
            raise KeyError("unknown config key %r" % k)
        cfg[k] = v
    return cfg


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for k, v in DEFAULTS.items():
        if isinstance(v, (int, float, str)) and not isinstance(v, bool):
            p.add_argument("--" + k.replace("_", "-"), type=type(v), default=v)
    p.add_argument("--fallback", default="", help="comma-separated layer or layer:gemm in BF16")
    p.add_argument("--override", default="{}", help='JSON {"layer[:gemm]": "recipe"}')
    p.add_argument("--gain", default=None, help="mechanism as JSON (see the module docstring)")
    p.add_argument("--free-unit", default=None, help='JSON {"layer": 1, "unit": 0, "lr_mult": 100}')
    p.add_argument("--capture-steps", default="", help="comma-separated captured steps")
    a = p.parse_args(argv)
    over = {k: getattr(a, k) for k in DEFAULTS
            if k not in ("fallback", "override", "gain", "free_unit", "capture_steps")}
    over["fallback"] = [s for s in a.fallback.split(",") if s]
    over["override"] = json.loads(a.override)
    over["gain"] = json.loads(a.gain) if a.gain else None
    over["free_unit"] = json.loads(a.free_unit) if a.free_unit else None
    over["capture_steps"] = sorted(int(s) for s in a.capture_steps.split(",") if s)
    cfg = make_config(**over)
    r = train(cfg)
    print(json.dumps({k: r[k] for k in ("hash", "final_val_loss", "mean_train_loss_2nd_half",
                                        "seconds", "s_per_step")}))


if __name__ == "__main__":
    main()
