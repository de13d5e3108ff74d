"""The char-GPT of the real captures and the calibration: its options, corpus, model, optimizer,
batches and learning-rate schedule. scripts/make_real_capture.py (the captures in datasets/real/)
and calibration/harness.py (the outcome harness) both build their runs from it, so a harness run
is that model trained the same way.
"""

import argparse
import glob
import hashlib
import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The first line of scripts/make_real_capture.py's docstring: its --help's description.
DESCRIPTION = "Trains a small GPT-style byte-level language model on real text and captures its GEMM operands."

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=DESCRIPTION,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--run-name", required=True, help="name of the run (folder name under datasets/real)")
    p.add_argument("--out", default=None, help="output folder (default datasets/real/RUN_NAME)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (AdamW)")
    p.add_argument("--warmup", type=int, default=30, help="linear warmup steps (0 = none)")
    p.add_argument("--min-lr-ratio", type=float, default=0.1,
                   help="cosine decay from lr to lr*ratio at the last step (1 = constant lr)")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping (0 = none)")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta2", type=float, default=0.95, help="AdamW beta2 (beta1 = 0.9)")
    p.add_argument("--capture-steps", default="1,2,3,299",
                   help="comma-separated captured steps ('' = amax trace only)")
    p.add_argument("--hook-regex",
                   default=r"^(layers\.0\.self_attention\.linear_qkv|layers\.3\.mlp\.linear_fc2)$",
                   help="hooked linears (re.search on the module name); the amax trace covers them")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128, help="tokens per sequence")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch")
    p.add_argument("--accum", type=int, default=16, help="micro-batches per optimizer step")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (part of the determinism: results differ by count)")
    p.add_argument("--eval-every", type=int, default=25, help="held-out loss every N steps (0 = never)")
    p.add_argument("--eval-seqs", type=int, default=16, help="sequences in the fixed held-out batch")
    p.add_argument("--corpus-dir", default="/usr/lib/python3.11")
    p.add_argument("--corpus-glob", default="*.py")
    p.add_argument("--heldout-fraction", type=float, default=0.05,
                   help="the corpus' last fraction is held out (never trained on)")
    p.add_argument("--expect-corpus-sha256", default=None,
                   help="fail unless the concatenated corpus has this sha256")
    p.add_argument("--capture-py", default=os.path.join(REPO, "python"),
                   help="folder of fp8a_capture.py")
    a = p.parse_args(argv)
    if a.out is None:
        a.out = os.path.join(REPO, "datasets", "real", a.run_name)
    a.capture_steps = sorted({int(s) for s in a.capture_steps.split(",") if s.strip()})
    return a


# ---- corpus ---------------------------------------------------------------------------------------

def load_corpus(a):
    files = sorted(glob.glob(os.path.join(a.corpus_dir, a.corpus_glob)))
    if not files:
        sys.exit("no corpus files match %s" % os.path.join(a.corpus_dir, a.corpus_glob))
    chunks = []
    for f in files:
        with open(f, "rb") as fh:
            chunks.append(fh.read())
    data = b"".join(chunks)
    sha = hashlib.sha256(data).hexdigest()
    if a.expect_corpus_sha256 and sha != a.expect_corpus_sha256:
        sys.exit("corpus sha256 %s != expected %s (different Python stdlib version?)"
                 % (sha, a.expect_corpus_sha256))
    return files, data, sha


# ---- model ----------------------------------------------------------------------------------------

def build_model(torch, a):
    nn = torch.nn
    F = torch.nn.functional

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = a.heads
            self.linear_qkv = nn.Linear(a.d_model, 3 * a.d_model)
            self.linear_proj = nn.Linear(a.d_model, a.d_model)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.linear_qkv(x).split(d, dim=2)
            hd = d // self.heads
            q = q.view(b, t, self.heads, hd).transpose(1, 2)
            k = k.view(b, t, self.heads, hd).transpose(1, 2)
            v = v.view(b, t, self.heads, hd).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)).float() * (1.0 / math.sqrt(hd))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1).to(v.dtype)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            return self.linear_proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear_fc1 = nn.Linear(a.d_model, 4 * a.d_model)
            self.linear_fc2 = nn.Linear(4 * a.d_model, a.d_model)

        def forward(self, x):
            return self.linear_fc2(F.gelu(self.linear_fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = nn.LayerNorm(a.d_model)
            self.self_attention = SelfAttention()
            self.pre_mlp_layernorm = nn.LayerNorm(a.d_model)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.self_attention(self.input_layernorm(x))
            return x + self.mlp(self.pre_mlp_layernorm(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(256, a.d_model)
            self.position_embedding = nn.Embedding(a.seq, a.d_model)
            self.layers = nn.ModuleList([Block() for _ in range(a.layers)])
            self.final_layernorm = nn.LayerNorm(a.d_model)
            self.output_layer = nn.Linear(a.d_model, 256, bias=False)
            for name, p in self.named_parameters():  # GPT-2 initialisation
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif "layernorm" in name:
                    nn.init.ones_(p)
                elif name.endswith("linear_proj.weight") or name.endswith("linear_fc2.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * a.layers))
                else:
                    nn.init.normal_(p, 0.0, 0.02)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.embedding(idx) + self.position_embedding(pos)
            for blk in self.layers:
                x = blk(x)
            return self.output_layer(self.final_layernorm(x))

    return GPT()


def split_tokens(torch, a, data):
    """The corpus as byte tokens: (train, held-out), the last --heldout-fraction held out."""
    tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8).long()
    n_held = int(len(tokens) * a.heldout_fraction)
    return tokens[: len(tokens) - n_held], tokens[len(tokens) - n_held:]


def make_optimizer(torch, model, a):
    """AdamW, weight decay on the matrices except the embeddings."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embedding" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embedding" not in n)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=a.lr, betas=(0.9, a.beta2), eps=1e-8)


def sample_batch(torch, src, n, g, a, dev):
    """n sequences of a.seq tokens at random starts (generator g): (inputs, next-token targets)."""
    span = a.seq + 1
    starts = torch.randint(0, len(src) - span, (n,), generator=g)
    rows = torch.stack([src[s: s + span] for s in starts.tolist()])
    return rows[:, :-1].to(dev), rows[:, 1:].to(dev)


def lr_at(a, step):
    if a.warmup > 0 and step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    span = max(1, a.steps - 1 - a.warmup)
    frac = min(1.0, max(0.0, (step - a.warmup) / span))
    return a.lr * (a.min_lr_ratio + (1.0 - a.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * frac)))
