#!/usr/bin/env python3
"""Trains a small GPT-style byte-level language model on real text and captures its GEMM operands.

This makes the real captures in datasets/real/ (see datasets/real/README.md): a 4-layer decoder
(Megatron-style module names: layers.N.self_attention.linear_qkv / linear_proj,
layers.N.mlp.linear_fc1 / linear_fc2, output_layer) is trained under BF16 autocast with AdamW on
the concatenated Python standard-library sources of the machine (/usr/lib/python3.11/*.py, sorted
by name; byte tokens, vocab 256), and python/fp8a_capture.py records:

  rank0_step_NNNNNN.safetensors  X, W, dY of the hooked linears at the captured steps
                                 (micro-batch 0 of the step; BF16 as the GEMMs receive them)
  amax_trace_rank0.csv           amax of every hooked tensor at every step (all micro-batches),
                                 for fp8-advisor's exact delayed-scaling replay
  loss.csv                       step,loss,grad_norm,lr,heldout_loss (heldout every --eval-every)
  run.json                       configuration, corpus (files, bytes, sha256), versions, timings

Deterministic: fixed seeds (model init from torch.manual_seed, batches from their own
torch.Generator), torch.use_deterministic_algorithms(True), a fixed thread count (--threads is
part of it: another count gives other bits). The same command on the same processor type, torch
build and corpus gives byte-identical safetensors, trace and loss.csv (run.json: timings differ).

Needs PyTorch (Debian: apt-get install python3-torch; run it with /usr/bin/python3).

  /usr/bin/python3 scripts/make_real_capture.py --run-name lm-sane  --lr 1e-3 --warmup 30 --clip 1.0
  /usr/bin/python3 scripts/make_real_capture.py --run-name lm-spike --lr 6e-2 --warmup 0  --clip 0

(the exact commands of the shipped runs are in datasets/real/README.md).
"""

import copy
import glob
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "scripts/make_real_capture.py"
sys.path.insert(0, os.path.join(REPO, "calibration"))
# The model, its options, corpus and schedule, shared with the calibration harness.
from char_gpt import (build_model, load_corpus, lr_at, make_optimizer, parse_args,  # noqa: E402
                      sample_batch, split_tokens)


def machine_info(torch, device):
    """The processor (bf16 GEMM kernels differ by ISA, so bitwise results can too) or the GPU."""
    info = {"threads": torch.get_num_threads()}
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        for line in text.splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        flags = set()
        for line in text.splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
        info["cpu_flags"] = sorted(f for f in flags if f in ("avx2", "avx512f", "avx512_bf16",
                                                             "amx_bf16", "amx_tile"))
    except OSError:
        pass
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = str(torch.version.cuda)
    return info


def package_versions(paths):
    """Debian packages owning the corpus files and the torch module, with versions (best effort)."""
    out = {}
    try:
        owners = subprocess.run(["dpkg", "-S"] + list(paths), capture_output=True, text=True,
                                check=False).stdout
        pkgs = sorted({line.split(":")[0] for line in owners.splitlines() if ": " in line})
        if pkgs:
            q = subprocess.run(["dpkg-query", "-W"] + pkgs, capture_output=True, text=True,
                               check=False).stdout
            for line in q.splitlines():
                name, _, ver = line.partition("\t")
                out[name] = ver
    except OSError:
        pass
    return out


# ---- main -----------------------------------------------------------------------------------------

def main(argv=None):
    a = parse_args(argv)
    if a.device == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    t_start = time.time()
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, a.capture_py)
    import fp8a_capture

    torch.set_num_threads(a.threads)
    # CPU: strict. CUDA: deterministic kernels where PyTorch has them, a warning (not an error) for
    # an op without one, so that a GPU remake is not stopped by a PyTorch version's op list.
    torch.use_deterministic_algorithms(True, warn_only=(a.device == "cuda"))
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("--device cuda: torch.cuda.is_available() is False")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)

    files, data, sha = load_corpus(a)
    train, held = split_tokens(torch, a, data)
    print("corpus: %d files, %d bytes, sha256 %s; train %d, held-out %d bytes"
          % (len(files), len(data), sha, len(train), len(held)), flush=True)

    torch.manual_seed(a.seed)
    model = build_model(torch, a).to(dev)
    eval_model = copy.deepcopy(model)  # a hook-free twin: held-out forwards stay out of the trace
    n_params = sum(p.numel() for p in model.parameters())
    opt = make_optimizer(torch, model, a)

    gen = torch.Generator().manual_seed(a.seed + 1)  # batches (CPU generator: same on any device)
    heldgen = torch.Generator().manual_seed(a.seed + 2)

    def batch(src, n, g):
        return sample_batch(torch, src, n, g, a, dev)

    held_x, held_y = batch(held, a.eval_seqs, heldgen)

    def heldout_loss():
        eval_model.load_state_dict(model.state_dict())
        with torch.no_grad(), torch.autocast(a.device, dtype=torch.bfloat16):
            logits = eval_model(held_x)
        return F.cross_entropy(logits.float().reshape(-1, 256), held_y.reshape(-1)).item()

    os.makedirs(a.out, exist_ok=True)
    for old in glob.glob(os.path.join(a.out, "rank*_step_*.safetensors")):
        os.remove(old)  # a remake with other --capture-steps leaves no stale step
    cap = fp8a_capture.attach(model, a.out, steps=a.capture_steps, name_regex=a.hook_regex)
    print("model: %d params; hooked %s; capturing steps %s"
          % (n_params, ", ".join(cap.layers), a.capture_steps), flush=True)

    rows = []
    t_train = time.time()
    t_last, last_printed = t_train, -1
    step_times = []
    for step in range(a.steps):
        t0 = time.time()
        lr = lr_at(a, step)
        for grp in opt.param_groups:
            grp["lr"] = lr
        total = 0.0
        for _ in range(a.accum):
            x, y = batch(train, a.micro_batch, gen)
            with torch.autocast(a.device, dtype=torch.bfloat16):
                logits = model(x)
            loss = F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
            (loss / a.accum).backward()
            total += loss.item()
        max_norm = a.clip if a.clip > 0 else float("inf")
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
        opt.step()
        opt.zero_grad(set_to_none=True)
        cap.step()
        step_times.append(time.time() - t0)
        hl = ""
        if a.eval_every > 0 and (step % a.eval_every == 0 or step == a.steps - 1):
            hl = repr(heldout_loss())
        rows.append((step, total / a.accum, gnorm, lr, hl))
        if step % 25 == 0 or step == a.steps - 1:
            now = time.time()
            print("step %4d  loss %.4f  grad_norm %.4g  lr %.3g  heldout %s  (%.3f s/step since "
                  "step %d)" % (step, total / a.accum, gnorm, lr, hl or "-",
                                (now - t_last) / (step - last_printed), last_printed + 1),
                  flush=True)
            t_last, last_printed = now, step
    cap.detach()
    t_end = time.time()

    with open(os.path.join(a.out, "loss.csv"), "w", newline="") as f:
        f.write("step,loss,grad_norm,lr,heldout_loss\n")
        for step, l, g, lr, hl in rows:
            f.write("%d,%r,%r,%r,%s\n" % (step, l, g, lr, hl))

    captured = sorted(os.path.basename(p) for p in cap.files)
    sizes = {n: os.path.getsize(os.path.join(a.out, n)) for n in captured + ["amax_trace_rank0.csv"]}
    cap_steps_t = [step_times[s] for s in a.capture_steps if s < len(step_times)]
    plain_t = [t for s, t in enumerate(step_times) if s not in set(a.capture_steps)]
    info = {
        "generator": GENERATOR,
        "command": [os.path.relpath(sys.argv[0], REPO) if sys.argv[0] else GENERATOR] + sys.argv[1:],
        "args": {k: v for k, v in vars(a).items() if k not in ("out", "capture_py")},
        "model": {"params": n_params, "hooked": cap.layers, "vocab": 256,
                  "tokens_per_step": a.accum * a.micro_batch * a.seq,
                  "tokens_per_captured_micro_batch": a.micro_batch * a.seq},
        "corpus": {"dir": a.corpus_dir, "glob": a.corpus_glob, "files": len(files),
                   "first": os.path.basename(files[0]), "last": os.path.basename(files[-1]),
                   "bytes": len(data), "sha256": sha, "train_bytes": len(train),
                   "heldout_bytes": len(held)},
        "versions": {"python": sys.version.split()[0], "torch": str(torch.__version__),
                     "debian_packages": package_versions(files + [torch.__file__])},
        "device": a.device,
        "machine": machine_info(torch, a.device),
        "timings_s": {"total": round(t_end - t_start, 2), "train": round(t_end - t_train, 2),
                      "mean_step": round(sum(step_times) / len(step_times), 4),
                      "mean_plain_step": round(sum(plain_t) / max(1, len(plain_t)), 4),
                      "mean_captured_step": round(sum(cap_steps_t) / max(1, len(cap_steps_t)), 4)},
        "files": sizes,
    }
    with open(os.path.join(a.out, "run.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %s: %s" % (a.out, ", ".join("%s (%d B)" % kv for kv in sorted(sizes.items()))))
    print("timings: total %.1f s, training %.1f s, %.3f s/step (captured steps %.3f s/step)"
          % (t_end - t_start, t_end - t_train, info["timings_s"]["mean_step"],
             info["timings_s"]["mean_captured_step"]), flush=True)


if __name__ == "__main__":
    main()
