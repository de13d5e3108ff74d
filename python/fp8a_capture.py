"""fp8a_capture: a PyTorch hook that captures GEMM operands for fp8-advisor.

One call attaches it to a model::

    import fp8a_capture
    cap = fp8a_capture.attach(model, "captures/", steps=[100, 200])   # or every=100, or range(...)
    for batch in loader:
        loss = model(batch).sum()
        loss.backward()
        optimizer.step(); optimizer.zero_grad()
        cap.step()             # REQUIRED: once per optimizer step, after optimizer.step()
    cap.detach()               # or: with fp8a_capture.attach(...) as cap: ...

For every hooked module (default: every ``torch.nn.Linear``; Transformer Engine's ``Linear`` when
TE is installed; Megatron-Core's ``ColumnParallelLinear`` and ``RowParallelLinear`` when the model's
code has imported them; restrict with ``name_regex``), it records the three operands of the
module's GEMM, named like the captures fp8-advisor reads (``<layer>.<role>``, layer = the module's
path in ``model.named_modules()``):

- ``<layer>.activation``: the input X of the linear (all leading dims kept),
- ``<layer>.weight``: ``module.weight`` ([out, in]),
- ``<layer>.gradient``: dY, the gradient of the module's output.

MoE experts in one grouped module (TE's ``GroupedLinear``: Megatron's ``TEGroupedMLP``, the
``--moe-grouped-gemm`` experts) are captured per expert, as TE quantizes them (each expert's
operands get quantizers of their own): layer ``<module>.expert<i>`` for the module's GEMM i (the
local expert), X and dY the rows of ``forward(inp, m_splits)``'s input and output gradient that
``m_splits`` gives expert i, W its ``weight{i}``. An expert that got no token in a step records its
weight only. fp8-advisor maps every expert of a grouped module to the module itself in the
configs (one recipe per module, BF16 for a GEMM any expert needs in BF16; the files say which).
Megatron's SequentialMLP experts are separate linear modules and are captured as such.
TE's fused ``LayerNormLinear`` and ``LayerNormMLP`` are skipped with a warning: their GEMM inputs
are internal to the module. TE's own ``DumpTensors`` debug feature dumps them as TE feeds them;
:func:`te_dump_config` writes its config, and fp8-advisor reads the dumps.

Under autocast the tensors are recorded as the GEMM receives them: X and W cast to the autocast
dtype (e.g. BF16), dY in the output's dtype. Otherwise each tensor keeps its own dtype (F32, F16,
BF16; F64 is stored as F32, noted in the metadata).

Outputs, in ``out_dir`` (R = torch.distributed rank, 0 without torch.distributed):

- ``rank{R}_step_{STEP:06d}.safetensors`` for every captured step: one file per step and rank,
  ``__metadata__`` = step, rank, world_size, micro_batch, autocast, torch_version, generator,
  ``source_dtypes`` (JSON: tensor -> the dtype before any autocast cast) and, when known,
  ``tokens_per_step`` and ``tokens_per_step_source`` (below).
  The safetensors file is written by this module (no safetensors package needed).
- ``amax_trace_rank{R}.csv``: ``step,tensor,amax``, one row per step per hooked tensor, appended
  and flushed at every ``step()``; the amax is ``torch.amax(x.abs())`` of the tensor as recorded
  (NaN-propagating: a NaN anywhere gives ``nan``; infinities give ``inf``), and with several
  micro-batches per step it is the max over them (as Transformer Engine's amax of a step);
  values are written with ``repr(float(v))`` (exact for float32/BF16/F16 amaxes).

Steps are counted by ``step()`` calls, from ``start_step`` (default 0). Captured steps: the
union of ``steps`` (any iterable of ints: a list, a ``range``; or a callable ``step -> bool``) and
``every`` (steps with ``step % every == 0``).

Tokens per step: the cost of FP8 depends on how many tokens a training step runs through each
layer (the global batch times the sequence length, over every data-parallel rank), which a
capture of one micro-batch does not show. ``tokens_per_step`` gives it; otherwise the hook counts
it: the rows of X (all dims but the last) of the first hooked layer's forwards in the step (those
run with gradients enabled: an evaluation under ``torch.no_grad`` is not training), times
``data_parallel_size`` (default 1 without torch.distributed; with it, pass it, or nothing is
counted, since tensor-parallel ranks see the same tokens). The metadata records it as
``tokens_per_step`` with ``tokens_per_step_source`` ``given`` or ``counted``, and
``fp8-advisor run`` prices the GEMMs at it.

Gradient accumulation: every forward of a module within one step is a micro-batch (counted per
module, from 0); ``micro_batch`` (default 0) picks which one a captured step stores, and the
metadata says which. The amax trace covers all of them. Activation recomputation (checkpointing)
re-runs forwards and would be counted as extra micro-batches: capture without it.

Overhead: on non-captured steps only a scalar amax per tensor is computed (on the tensor's device,
no host sync until ``step()``); nothing else is kept. On captured steps the selected micro-batch's
tensors are copied to the CPU and released when the file is written at ``step()``. The hooks hold
no reference to any activation, gradient or graph.
"""

import ctypes
import inspect
import json
import math
import os
import re
import sys
import warnings

import torch

import fp8a_safetensors

# register_forward_hook(..., with_kwargs=True) arrived in PyTorch 2.0.
try:
    _FORWARD_HOOK_KWARGS = "with_kwargs" in inspect.signature(torch.nn.Module.register_forward_hook).parameters
except (TypeError, ValueError):
    _FORWARD_HOOK_KWARGS = False

__all__ = ["attach", "Capture", "te_dump_config", "write_safetensors"]

_SAFETENSORS_DTYPE = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
}
_ROLES = ("activation", "weight", "gradient")


def write_safetensors(path, tensors, metadata=None):
    """Write ``tensors`` (an ordered dict name -> tensor, dtype F32/F16/BF16, on any device) to
    ``path`` in the safetensors format, through fp8a_safetensors.write_safetensors (the layout).
    ``metadata`` values must be strings.
    """
    entries = {}
    for name, t in tensors.items():
        if t.dtype not in _SAFETENSORS_DTYPE:
            raise TypeError("%s: dtype %s not supported (F32, F16, BF16)" % (name, t.dtype))
        t = t.detach().to("cpu").contiguous()
        nbytes = t.numel() * t.element_size()
        data = ctypes.string_at(t.data_ptr(), nbytes) if nbytes else b""
        entries[name] = (_SAFETENSORS_DTYPE[t.dtype], list(t.shape), data)
    fp8a_safetensors.write_safetensors(path, entries, metadata)


_NO_AMINMAX = set()  # (device type, dtype) where torch.aminmax is not implemented


def _absmax(t):
    """``torch.amax(t.abs())`` as a 0-dim tensor on t's device, NaN-propagating.

    Computed as max(|min|, |max|) from one ``torch.aminmax`` pass: the same value exactly
    (negation and abs are exact; aminmax propagates NaN, infinities give inf), without the
    full-size ``|t|`` temporary, which made the reduction about twice as slow. Falls back to
    ``amax(|t|)`` where aminmax is not implemented (e.g. float16 on the CPU in PyTorch 1.13).
    """
    key = (t.device.type, t.dtype)
    if key not in _NO_AMINMAX:
        try:
            mn, mx = torch.aminmax(t)
            return torch.maximum(mn.abs(), mx.abs())
        except (RuntimeError, NotImplementedError, AttributeError, TypeError):
            _NO_AMINMAX.add(key)
    return torch.amax(t.abs())


def _autocast_dtype(t):
    """The dtype autocast casts a floating tensor on t's device to for a GEMM, or None."""
    dev = t.device.type
    if not t.is_floating_point() or t.dtype == torch.float64:
        return None
    try:  # PyTorch >= 2.4
        if torch.is_autocast_enabled(dev):
            return torch.get_autocast_dtype(dev)
        return None
    except (TypeError, AttributeError, RuntimeError):
        pass
    if dev == "cpu":
        if torch.is_autocast_cpu_enabled():
            return torch.get_autocast_cpu_dtype()
    elif dev == "cuda":
        if torch.is_autocast_enabled():
            return torch.get_autocast_gpu_dtype()
    return None


def _linear_types():
    """(module types whose GEMM operands are X = input 0, W = .weight, dY = grad of output 0,
    TE fused types that are skipped with a warning, grouped types: TE's GroupedLinear)."""
    types = [torch.nn.Linear]
    fused, grouped = [], []
    # Megatron-Core's own linear layers (its local layer spec, SequentialMLP's experts there):
    # forward(input_) -> (output, bias), the GEMM X @ weight.T. Hooked only when the model's code
    # has imported them; this module never imports Megatron.
    mpu_layers = sys.modules.get("megatron.core.tensor_parallel.layers")
    for n in ("ColumnParallelLinear", "RowParallelLinear"):
        if mpu_layers is not None and isinstance(getattr(mpu_layers, n, None), type):
            types.append(getattr(mpu_layers, n))
    try:
        import transformer_engine.pytorch as te  # noqa: F401

        if hasattr(te, "Linear"):
            types.append(te.Linear)
        if hasattr(te, "GroupedLinear"):
            grouped.append(te.GroupedLinear)
        for n in ("LayerNormLinear", "LayerNormMLP"):
            if hasattr(te, n):
                fused.append(getattr(te, n))
    except Exception:  # TE absent or broken: plain PyTorch only
        pass
    return tuple(types), tuple(fused), tuple(grouped)


def _grouped_weights(module, n):
    """The n expert weights [out, in] of a GroupedLinear: ``weight0`` ... ``weight{n-1}``, or the
    members of its one packed ``weight`` (TE's ``single_grouped_weight``: a GroupedTensor), each
    dequantized when it is an FP8 tensor; None for a weight that cannot be had."""
    ws = [getattr(module, "weight%d" % i, None) for i in range(n)]
    if all(torch.is_tensor(w) for w in ws):
        return ws
    packed = getattr(module, "weight", None)
    if packed is not None and hasattr(packed, "split_into_quantized_tensors"):
        parts = list(packed.split_into_quantized_tensors())
        if len(parts) == n:
            return [p.dequantize() if hasattr(p, "dequantize") else p for p in parts]
    return [w if torch.is_tensor(w) else None for w in ws]


def _expert_name(module, i):
    """The layer name of expert i of a grouped module: ``<module>.expert<i>``, i the GEMM's index
    in the module (the local expert, numbered as Megatron's SequentialMLP numbers local_experts)."""
    return "%s.expert%d" % (module, i)


def _dist_rank_world():
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    return 0, 1


class Capture(object):
    """The hooks attached by :func:`attach`. Call :meth:`step` once per optimizer step;
    :meth:`detach` (or leaving the ``with`` block) removes every hook."""

    def __init__(self, model, out_dir, steps=None, every=None, name_regex=None, micro_batch=0,
                 start_step=0, append=False, on_capture=None, module_types=None,
                 tokens_per_step=None, data_parallel_size=None, grouped_module_types=None):
        if every is not None and int(every) <= 0:
            raise ValueError("every must be a positive integer")
        if int(micro_batch) < 0:
            raise ValueError("micro_batch must be >= 0")
        if tokens_per_step is not None and not 1 <= int(tokens_per_step) <= 10 ** 12:
            raise ValueError("tokens_per_step must be an integer from 1 to 10**12")
        if data_parallel_size is not None and int(data_parallel_size) <= 0:
            raise ValueError("data_parallel_size must be a positive integer")
        self._step_calls = 0
        self._forwards = 0  # hooked forwards seen, all steps
        self.tokens_per_step = None if tokens_per_step is None else int(tokens_per_step)
        self.data_parallel_size = None if data_parallel_size is None else int(data_parallel_size)
        self._warned_tokens = False
        self.out_dir = str(out_dir)
        self.every = None if every is None else int(every)
        if steps is None or callable(steps):
            self._steps_fn = steps
            self._steps = frozenset()
        else:
            self._steps_fn = None
            self._steps = frozenset(int(s) for s in steps)
        self.micro_batch = int(micro_batch)
        self.current_step = int(start_step)
        self._start_step = self.current_step
        self.on_capture = on_capture
        self.files = []  # safetensors paths written, in order
        os.makedirs(self.out_dir, exist_ok=True)

        types, fused, grouped = _linear_types()
        if module_types is not None:
            types, fused = tuple(module_types), ()
        if grouped_module_types is not None:
            grouped = tuple(grouped_module_types)
        rx = re.compile(name_regex) if name_regex is not None else None
        self._handles = []
        self.layers = []  # hooked layer names, in named_modules() order (a grouped module's experts)
        self._warned_splits = set()
        self._order = {}  # tensor name -> position (trace row order)
        for name, mod in model.named_modules():
            lname = name if name else type(mod).__name__.lower()
            if rx is not None and not rx.search(lname):
                continue
            if fused and isinstance(mod, fused):
                warnings.warn("fp8a_capture: %s (%s) skipped: the GEMM inputs of TE's fused "
                              "LayerNorm modules are internal; dump them with TE's DumpTensors "
                              "(fp8a_capture.te_dump_config writes the config)" % (lname, type(mod).__name__))
                continue
            if grouped and isinstance(mod, grouped):
                n = int(getattr(mod, "num_gemms", 0) or 0)
                if n <= 0:
                    warnings.warn("fp8a_capture: %s (%s) skipped: no num_gemms" % (lname, type(mod).__name__))
                    continue
                experts = [_expert_name(lname, i) for i in range(n)]
                self._hook_module(mod, experts, self._make_grouped_hook(lname, experts))
                continue
            if not isinstance(mod, types) or getattr(mod, "weight", None) is None:
                continue
            self._hook_module(mod, [lname], self._make_forward_hook(lname))
        if not self.layers:
            warnings.warn("fp8a_capture: no module matched; nothing will be captured")

        self.rank, self.world_size = _dist_rank_world()
        self.trace_path = None
        self._trace_file = None
        self._append = bool(append)
        self._reset_step_state()

    # ---- step bookkeeping -------------------------------------------------------------------

    def is_capture_step(self, step):
        """True when ``step`` is one whose tensors are written."""
        if step in self._steps:
            return True
        if self._steps_fn is not None and self._steps_fn(step):
            return True
        return self.every is not None and step % self.every == 0

    def _reset_step_state(self):
        self._capturing = self.is_capture_step(self.current_step)
        self._fwd_count = {}  # layer -> forwards seen in this step
        self._rows = {}  # layer -> rows of X in this step's forwards with gradients enabled
        self._grads = 0  # gradients recorded in this step
        self._amax = {}  # tensor name -> 0-dim tensor (running max, on the tensor's device)
        self._pending = {}  # tensor name -> CPU copy (captured micro-batch only)
        self._source_dtype = {}  # tensor name -> dtype before autocast cast
        self._autocast = set()

    def _record(self, name, t, mb):
        """Record tensor ``t`` (already as the GEMM sees it, or to be cast) for this step."""
        with torch.no_grad():
            t = t.detach()
            cast = _autocast_dtype(t) if not name.endswith(".gradient") else None
            if cast is not None and cast != t.dtype:
                self._autocast.add(str(cast).replace("torch.", ""))
            else:
                cast = None
            if t.numel() > 0:
                # Round-to-nearest is monotone, so amax(cast(x)) == cast(amax(x)): no full copy.
                a = _absmax(t)
                if cast is not None:
                    a = a.to(cast)
                a = a.float()
                prev = self._amax.get(name)
                if prev is None:
                    self._amax[name] = a
                else:
                    self._amax[name] = torch.maximum(prev, a)  # NaN-propagating
            # An empty tensor (an MoE expert that got no token) is not recorded: it holds no
            # value to evaluate, and fp8-advisor refuses empty tensors.
            if self._capturing and mb == self.micro_batch and name not in self._pending and t.numel() > 0:
                c = t.to(cast) if cast is not None else t
                src = t.dtype
                if c.dtype == torch.float64:
                    c = c.float()
                self._pending[name] = c.to("cpu", copy=True).contiguous()
                self._source_dtype[name] = str(src).replace("torch.", "")

    def _hook_module(self, mod, layers, hook):
        """Hooks ``mod`` for its captured ``layers`` (their tensors' places in the trace) with
        ``hook(module, inputs, output, kwargs)``, given keyword inputs where PyTorch >= 2.0 passes
        them to forward hooks (``with_kwargs=True``)."""
        self.layers.extend(layers)
        for layer in layers:
            for r in _ROLES:
                self._order["%s.%s" % (layer, r)] = len(self._order)
        if _FORWARD_HOOK_KWARGS:
            handle = mod.register_forward_hook(lambda m, args, kwargs, out: hook(m, args, out, kwargs),
                                               with_kwargs=True)
        else:
            handle = mod.register_forward_hook(hook)
        self._handles.append(handle)

    def _next_micro_batch(self, lname):
        """Counts a forward of module ``lname`` and returns its micro-batch in this step."""
        self._forwards += 1
        mb = self._fwd_count.get(lname, 0)
        self._fwd_count[lname] = mb + 1
        return mb

    def _hook_output_gradient(self, output, record):
        """Calls ``record(g)`` with the gradient of the forward's output (its first element for a
        tuple) when the backward of this step reaches it."""
        y = output[0] if isinstance(output, (tuple, list)) and output else output
        if not (torch.is_tensor(y) and y.requires_grad):
            return
        cap, step = self, self.current_step

        def grad_hook(g):
            # A backward that runs after step() (late) belongs to the step it was made in; drop it
            # rather than mislabel it.
            if g is not None and cap._handles and cap.current_step == step:
                cap._grads += 1
                record(g)
            return None

        y.register_hook(grad_hook)

    def _make_forward_hook(self, lname):
        cap = self

        def forward_hook(module, inputs, output, kwargs=None):
            mb = cap._next_micro_batch(lname)
            x = inputs[0] if isinstance(inputs, (tuple, list)) and inputs else inputs
            if not (isinstance(inputs, (tuple, list)) and inputs) and kwargs:
                # linear(input=x): nn.Linear names it "input", Transformer Engine "inp".
                x = kwargs.get("input", kwargs.get("inp"))
            if torch.is_tensor(x):
                cap._record(lname + ".activation", x, mb)
                if torch.is_grad_enabled() and x.dim() >= 1 and x.shape[-1] > 0:
                    cap._rows[lname] = cap._rows.get(lname, 0) + x.numel() // x.shape[-1]
            w = getattr(module, "weight", None)
            if torch.is_tensor(w):
                cap._record(lname + ".weight", w, mb)
            cap._hook_output_gradient(output, lambda g: cap._record(lname + ".gradient", g, mb))
            return None

        return forward_hook

    def _make_grouped_hook(self, lname, experts):
        """The forward hook of a GroupedLinear (TE ``GroupedLinear.forward(inp, m_splits, ...)``):
        expert i's GEMM takes rows [sum(m_splits[:i]), sum(m_splits[:i+1])) of inp, its own weight
        ``weight{i}``, and those rows of the output's gradient; each is recorded under
        ``<module>.expert<i>`` (an expert that got no token in the step records its weight only).
        TE quantizes each expert's operands with a quantizer of its own (per-expert scales), so
        these are the tensors its casts see."""
        cap = self

        def forward_hook(module, inputs, output, kwargs=None):
            mb = cap._next_micro_batch(lname)
            args = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
            kwargs = kwargs or {}
            x = args[0] if args else kwargs.get("inp")
            splits = args[1] if len(args) > 1 else kwargs.get("m_splits")
            try:
                splits = [int(v) for v in (splits.tolist() if torch.is_tensor(splits) else splits)]
            except (TypeError, ValueError, AttributeError):
                splits = None
            rows = x.reshape(-1, x.shape[-1]) if torch.is_tensor(x) and x.dim() >= 1 else None
            if (rows is None or splits is None or len(splits) != len(experts) or min(splits) < 0
                    or sum(splits) > rows.shape[0]):
                if lname not in cap._warned_splits:
                    cap._warned_splits.add(lname)
                    warnings.warn("fp8a_capture: %s: no input and m_splits with one split per expert "
                                  "(%d); its experts are not captured" % (lname, len(experts)))
                return None
            offsets = [0]
            for v in splits:
                offsets.append(offsets[-1] + v)

            def record_rows(t, role):  # expert i's rows of t, for the experts that got any
                t2 = t.reshape(-1, t.shape[-1])
                for i, e in enumerate(experts):
                    if splits[i] > 0:
                        cap._record(e + role, t2[offsets[i]:offsets[i + 1]], mb)

            record_rows(rows, ".activation")
            for e, w in zip(experts, _grouped_weights(module, len(experts))):
                if torch.is_tensor(w):
                    cap._record(e + ".weight", w, mb)
            cap._hook_output_gradient(output, lambda g: record_rows(g, ".gradient"))
            return None

        return forward_hook

    def step(self):
        """End the current step: append its amaxes to the trace, write its capture (if any),
        advance the step counter. Call once per optimizer step, after ``optimizer.step()``.
        After :meth:`detach` it only advances the counter (nothing is written)."""
        if self._handles:
            self._flush()
        self._step_calls += 1
        self.current_step += 1
        self._reset_step_state()

    def _open_trace(self):
        if self._trace_file is None:
            self.trace_path = os.path.join(self.out_dir, "amax_trace_rank%d.csv" % self.rank)
            exists = os.path.exists(self.trace_path) and os.path.getsize(self.trace_path) > 0
            mode = "a" if self._append else "w"
            self._trace_file = open(self.trace_path, mode, newline="")
            if mode == "w" or not exists:
                self._trace_file.write("step,tensor,amax\n")
        return self._trace_file

    def _flush(self):
        self.rank, self.world_size = _dist_rank_world()
        names = sorted(self._amax, key=lambda n: self._order.get(n, len(self._order)))
        f = self._open_trace()
        if names:
            vals = torch.stack([self._amax[n].to("cpu") for n in names]).tolist()
            for n, v in zip(names, vals):
                f.write("%d,%s,%s\n" % (self.current_step, n, repr(float(v))))
        f.flush()
        if self._pending:
            names = sorted(self._pending, key=lambda n: self._order.get(n, len(self._order)))
            tensors = {n: self._pending[n] for n in names}
            if self._grads == 0:
                warnings.warn("fp8a_capture: step %d: no gradient reached the hooks (the forward ran "
                              "under torch.no_grad, or no backward ran before step()); the capture "
                              "has no dY" % self.current_step)
            meta = {
                "step": str(self.current_step),
                "rank": str(self.rank),
                "world_size": str(self.world_size),
                "micro_batch": str(self.micro_batch),
                "autocast": ",".join(sorted(self._autocast)) if self._autocast else "off",
                "source_dtypes": json.dumps({n: self._source_dtype[n] for n in names}),
                "torch_version": str(torch.__version__),
                "generator": "fp8a_capture",
            }
            tokens = self._tokens_per_step()
            if tokens is not None:
                meta["tokens_per_step"], meta["tokens_per_step_source"] = str(tokens[0]), tokens[1]
            if self.on_capture is not None:
                self.on_capture(self.current_step, tensors)
            path = os.path.join(self.out_dir, "rank%d_step_%06d.safetensors"
                                % (self.rank, self.current_step))
            write_safetensors(path, tensors, meta)
            self.files.append(path)
        self._amax = {}
        self._pending = {}

    def _tokens_per_step(self):
        """(tokens, "given" or "counted") for this step's metadata, or None when unknown."""
        if self.tokens_per_step is not None:
            return self.tokens_per_step, "given"
        first = next((n for n in self.layers if self._rows.get(n, 0) > 0), None)
        dp = self.data_parallel_size
        if dp is None and self.world_size == 1:
            dp = 1
        if first is None or dp is None:
            if not self._warned_tokens:
                self._warned_tokens = True
                why = ("no forward ran with gradients enabled" if first is None else
                       "torch.distributed runs %d ranks and data_parallel_size was not given"
                       % self.world_size)
                warnings.warn("fp8a_capture: tokens per step not recorded (%s): pass "
                              "tokens_per_step= (global batch x sequence length) to attach" % why)
            return None
        return self._rows[first] * dp, "counted"

    # ---- teardown ---------------------------------------------------------------------------

    def detach(self):
        """Remove every hook. A step with recorded amaxes that ``step()`` has not ended yet is
        flushed first (written under its step number, the counter is not advanced)."""
        if not self._handles:
            return
        if self._step_calls == 0 and self._forwards > 0:
            warnings.warn("fp8a_capture: step() was never called: every forward so far counts as "
                          "step %d; call cap.step() once per optimizer step" % self.current_step)
        last = self.current_step if self._fwd_count else self.current_step - 1  # the last step run
        if self._amax or self._pending:
            self._flush()
        missed = sorted(s for s in self._steps if s > last)
        if missed:
            warnings.warn("fp8a_capture: requested step(s) %s never reached: %s"
                          % (", ".join(str(s) for s in missed[:10]) + (" ..." if len(missed) > 10 else ""),
                             "the last step was %d" % last if last >= self._start_step
                             else "no training step ran"))
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._trace_file is not None:
            self._trace_file.close()
            self._trace_file = None
        self._reset_step_state()

    close = detach

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
        return False


def te_dump_config(path, steps, layer_regex=r"(^|\.)(linear_qkv|linear_fc1|fc1|fc2)$"):
    """Write an nvdlfw_inspect config that makes Transformer Engine (2.15+) dump the GEMM operands
    of its modules at ``steps`` with its own ``DumpTensors`` feature: X, W and dY of every GEMM
    as TE feeds them, before quantization. For TE's fused ``LayerNormLinear`` and
    ``LayerNormMLP``, whose GEMM inputs this hook cannot see (the normalised X, fc2's input,
    fc1's dY), and which Megatron's TE spec uses for ``linear_qkv`` and ``linear_fc1``.

    Args:
      path: the YAML file to write.
      steps: the debug API's iterations to dump (``debug_api.step()`` counts them; Megatron
        calls it once per training step), an iterable of ints.
      layer_regex: Python regex (``re.search``) on the debug API's layer names (``model.`` + the
        module path, Megatron's 1-based layer_number; LayerNormMLP's GEMMs are ``<name>.fc1``,
        ``<name>.fc2``); the default takes Megatron's fused ``linear_qkv`` and ``linear_fc1`` and
        LayerNormMLP's two GEMMs, not the modules the hook captures.

    Then, in training: ``debug_api.initialize(config_file=path,
    feature_dirs=[<transformer_engine>/debug/features], log_dir=LOG)``; fp8-advisor reads
    ``LOG/tensor_dumps`` (``run --capture LOG/tensor_dumps``) and maps the dumps' names back to
    Megatron's modules in the configs it writes.
    """
    steps = sorted({int(s) for s in steps})
    if not steps or steps[0] < 0:
        raise ValueError("steps must be one or more non-negative integers")
    re.compile(layer_regex)  # a bad pattern fails here, not in training
    quoted = "'" + str(layer_regex).replace("'", "''") + "'"  # a YAML single-quoted scalar
    ranges = ", ".join("[%d, %d]" % (s, s) for s in steps)
    text = ("# fp8a_capture.te_dump_config: TE DumpTensors of the GEMM operands, for fp8-advisor\n"
            "fp8a_dump_gemm_operands:\n"
            "  enabled: True\n"
            "  layers:\n"
            "    layer_name_regex_pattern: %s\n"
            "  transformer_engine:\n"
            "    DumpTensors:\n"
            "      enabled: True\n"
            "      tensors: [activation, weight, gradient]\n"
            "      high_precision_tensor: True\n"
            "      quantized_tensor: False\n"
            "      start_end_list: [%s]\n" % (quoted, ranges))
    tmp = str(path) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, str(path))
    return str(path)


def stats_logger(log_dir, rank=None):
    """An nvdlfw_inspect statistics logger that writes every value in full precision, for
    ``debug_api.initialize(..., statistics_logger=fp8a_capture.stats_logger(LOG))``.

    nvdlfw_inspect's default file logger prints ``value={:.4f}``: a gradient's cur_amax, std or
    mse under 5e-5 reads as 0, which is most of them. This one writes the same lines, the value
    as Python's repr of the float (the shortest text that reads back to the same number), to
    ``LOG/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-<rank>.log``, the default's
    file, so ``fp8-advisor run --training-log`` reads it as it reads the default's. ``rank``:
    torch.distributed's global rank when initialised, else 0.
    """
    from nvdlfw_inspect.logging import BaseLogger  # only where TE's debug API runs

    if rank is None:
        rank = _dist_rank_world()[0]
    folder = os.path.join(str(log_dir), "nvdlfw_inspect_statistics_logs")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "nvdlfw_inspect_globalrank-%d.log" % int(rank))

    class _FullPrecisionLogger(BaseLogger):
        def __init__(self):
            super().__init__()
            self.path = path
            self._file = open(path, "a", encoding="utf-8", buffering=1)  # a line at a time

        def log_scalar(self, name, value, iteration, **kwargs):
            value = float(value.item() if hasattr(value, "item") else value)
            self._file.write("%s \t\t\t\t iteration=%06d \t\t\t\t value=%r\n" % (name, int(iteration), value))

    return _FullPrecisionLogger()


def attach(model, out_dir, steps=None, every=None, name_regex=None, micro_batch=0, **kwargs):
    """Hook ``model`` and return a :class:`Capture`.

    Args:
      model: a ``torch.nn.Module``.
      out_dir: folder for ``rank{R}_step_{STEP:06d}.safetensors`` and ``amax_trace_rank{R}.csv``
        (created if missing).
      steps: captured steps: an iterable of ints (list, range) or a callable ``step -> bool``.
      every: also capture every step with ``step % every == 0``.
      name_regex: keep only modules whose name matches (``re.search``).
      micro_batch: which forward of a step (0-based, per module) a captured step stores.
      start_step (kw): number of the first step (default 0).
      append (kw): append to an existing amax trace instead of starting it over (default False).
      on_capture (kw): ``callable(step, tensors)`` called with the CPU tensors of a captured step
        before they are written (for checks; do not keep them if memory matters).
      module_types (kw): tuple of module types to hook instead of the Linear defaults.
      grouped_module_types (kw): tuple of grouped-module types (``forward(inp, m_splits)``,
        ``num_gemms``, ``weight{i}``) instead of TE's ``GroupedLinear``.
      tokens_per_step (kw): tokens one training step runs through each layer, over every
        data-parallel rank (global batch x sequence length); default: counted (module docstring).
      data_parallel_size (kw): data-parallel ranks, for the count (default 1 without
        torch.distributed).
    """
    return Capture(model, out_dir, steps=steps, every=every, name_regex=name_regex,
                   micro_batch=micro_batch, **kwargs)
