"""The Llama-2 linear layers of the GEMM-error benchmark's cases (issue 35), shared by
bench/make_llama_capture.py (the captures) and bench/peer_torch_gemm.py (the peer)."""

# Linear layers of one transformer layer: (name in the layer, K = in, N = out).
LLAMA2_7B = [
    ("self_attention.linear_qkv", 4096, 12288),
    ("self_attention.linear_proj", 4096, 4096),
    ("mlp.linear_fc1", 4096, 22016),  # gate and up fused
    ("mlp.linear_fc2", 11008, 4096),
]
LLAMA2_70B_FC1 = [("mlp.linear_fc1", 8192, 57344)]

# case -> (linear layers of one layer, default tokens, default layers, --layers allowed)
CASES = {
    "7b-layer": (LLAMA2_7B, 4096, 1, False),
    "7b-model": (LLAMA2_7B, 4096, 32, True),
    "70b-fc1": (LLAMA2_70B_FC1, 1024, 1, False),
}


def add_case_arguments(ap):
    """The case argument, as both scripts take it."""
    ap.add_argument("case", choices=sorted(CASES))


def add_size_arguments(ap):
    """--tokens and --layers, as both scripts take them (case_of reads them)."""
    ap.add_argument("--tokens", type=int, help="M (default 4096; 70b-fc1: 1024)")
    ap.add_argument("--layers", type=int, help="transformer layers of 7b-model (default 32)")


def case_of(ap, a):
    """(linear layers, tokens, layers) of the parsed arguments; ap.error on a bad one."""
    linears, tokens, layers, layers_ok = CASES[a.case]
    if a.layers is not None:
        if not layers_ok:
            ap.error("--layers is for 7b-model only")
        layers = a.layers
    if a.tokens is not None:
        tokens = a.tokens
    if tokens < 1 or layers < 1:
        ap.error("--tokens and --layers must be >= 1")
    return linears, tokens, layers
