#!/usr/bin/python3
"""Tests of python/fp8a_capture.py on a real PyTorch, as a training script uses it:
installed with pip from python/ (its pyproject.toml) into a virtualenv made for the
test (seeing this Python's torch), then imported by name.

Usage: test_hook.py PATH_TO_fp8-advisor [unittest args]
Exits 77 (skipped, for ctest SKIP_RETURN_CODE) when this Python cannot import torch.
"""
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import unittest
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_SRC = os.path.join(HERE, "..", "..", "python")
VENV_ENV = "FP8A_CAPTURE_TEST_VENV"

try:
    import torch
except Exception as e:  # noqa: BLE001
    print("SKIPPED: %s cannot import torch (%s); install python3-torch" % (sys.executable, e))
    sys.exit(77)


def run_in_package_venv():
    """pip-installs python/ into a fresh venv that sees this Python's packages (torch)
    and runs this file again there: offline (--no-index), with pip's build isolation, straight
    from the checkout, which the package's own backend leaves as it was (checked)."""
    tmp = tempfile.mkdtemp(prefix="fp8a_capture_venv_")
    try:
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        py = os.path.join(venv, "bin", "python")
        if sys.prefix != sys.base_prefix:  # run from a venv: its packages too
            child_site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        check=True, capture_output=True, text=True).stdout.strip()
            with open(os.path.join(child_site, "fp8a_parent_venv.pth"), "w") as f:
                f.write(sysconfig.get_paths()["purelib"] + "\n")
        def listing():
            return sorted((os.path.relpath(os.path.join(d, n), PACKAGE_SRC), os.path.getmtime(os.path.join(d, n)))
                          for d, dirs, files in os.walk(PACKAGE_SRC) for n in dirs + files)
        before = listing()
        subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
                        "--no-deps", PACKAGE_SRC], check=True)
        after = listing()
        if before != after:
            print("FAIL: pip install wrote into %s: %s" % (PACKAGE_SRC, sorted(set(after) - set(before))))
            return 1
        env = dict(os.environ, **{VENV_ENV: venv})
        return subprocess.run([py, os.path.abspath(__file__)] + sys.argv[1:], env=env).returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__" and VENV_ENV not in os.environ:
    sys.exit(run_in_package_venv())

import fp8a_capture  # noqa: E402  (the pip-installed package)

BINARY = None
_DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    """(metadata, {name: tensor}) parsed independently of the writer."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    end_max = 0
    for name, e in header.items():
        b, end = e["data_offsets"]
        end_max = max(end_max, end)
        buf = bytearray(raw[base + b:base + end])
        dt = _DT[e["dtype"]]
        if len(buf) == 0:
            t = torch.empty(e["shape"], dtype=dt)
        else:
            t = torch.frombuffer(buf, dtype=dt).reshape(e["shape"]).clone()
        out[name] = t
    assert base + end_max == len(raw), "data buffer not tiled exactly"
    return meta, out, header


def amax(t):
    return float(torch.amax(t.detach().abs()).float())


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))


def batch(step, mb=0, n=4):
    g = torch.Generator().manual_seed(1000 + 10 * step + mb)
    return torch.randn(n, 3, 16, generator=g), torch.randn(n, 3, 8, generator=g)


def read_text(path):
    with open(path) as f:
        return f.read()


def read_trace(path):
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[0] == "step,tensor,amax", lines[0]
    rows = {}
    for ln in lines[1:]:
        s, name, v = ln.split(",")
        key = (int(s), name)
        assert key not in rows, "duplicate row %r" % (key,)
        rows[key] = float(v)
    return rows


def run_inspect(path):
    p = subprocess.run([BINARY, "inspect", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode != 0:
        raise AssertionError("inspect exit %d:\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
    rows = {}
    lines = p.stdout.splitlines()
    hdr = lines[0].split()
    assert hdr[:6] == ["step", "layer", "role", "dtype", "shape", "amax"], hdr
    for ln in lines[1:]:
        m = re.match(r"\s*(\d+)\s+(\S+)\s+(activation|weight|gradient)\s+(\S+)\s+(\[[^\]]*\])\s+(\S+)",
                     ln)
        if not m:
            continue
        step, layer, role, dtype, shape, am = m.groups()
        shape = [int(v) for v in shape.strip("[]").split(",")]
        rows[(int(step), layer + "." + role)] = (dtype, shape, float(am))
    return rows


class Package(unittest.TestCase):
    def test_imported_from_the_installed_package(self):
        site = sysconfig.get_paths()["purelib"]
        self.assertEqual(os.path.dirname(os.path.abspath(fp8a_capture.__file__)), site)
        self.assertTrue(site.startswith(os.environ[VENV_ENV]))
        from importlib.metadata import version
        self.assertEqual(version("fp8a-capture"), "0.1.0")


class Trainer(object):
    """Trains make_model() with SGD, keeping what the test needs to check the capture
    independently of the hook: per step, the inputs, the weights before optimizer.step(), the
    gradient of the output, and the amax of every operand (from the test's own hooks)."""

    def __init__(self, model, cap, micro_batches=1, autocast=False):
        self.model, self.cap, self.mbs, self.autocast = model, cap, micro_batches, autocast
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.inputs, self.weights, self.dy, self.amaxes = {}, {}, {}, {}

    def train(self, nsteps):
        for step in range(nsteps):
            self.weights[step] = {n: p.detach().clone() for n, p in self.model.named_parameters()}
            for mb in range(self.mbs):
                x, y = batch(step, mb)
                self.inputs[(step, mb)] = x
                if self.autocast:
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        h = self.model[0](x)
                        h.retain_grad()
                        out = self.model[2](self.model[1](h))
                else:
                    h = self.model[0](x)
                    h.retain_grad()
                    out = self.model[2](self.model[1](h))
                out.retain_grad()
                loss = ((out.float() - y) ** 2).mean()
                loss.backward()
                self.dy[(step, mb)] = {"0": h.grad.detach().clone(), "2": out.grad.detach().clone()}
                self._amax(step, mb, x, h, out)
            self.opt.step()
            self.opt.zero_grad()
            self.cap.step()

    def _amax(self, step, mb, x, h, out):
        cast = (lambda t: t.to(torch.bfloat16)) if self.autocast else (lambda t: t)
        m = self.model
        vals = {
            "0.activation": amax(cast(x)), "0.weight": amax(cast(m[0].weight)),
            "0.gradient": amax(h.grad), "2.activation": amax(cast(torch.relu(h.detach()))),
            "2.weight": amax(cast(m[2].weight)), "2.gradient": amax(out.grad),
        }
        for k, v in vals.items():
            prev = self.amaxes.get((step, k))
            self.amaxes[(step, k)] = v if prev is None else max(prev, v)


def _dist_worker(rank, world, init_file, out_dir):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    try:
        model = make_model()
        cap = fp8a_capture.attach(model, out_dir, steps=[1])
        tr = Trainer(model, cap)
        tr.train(2)
        cap.detach()
    finally:
        dist.destroy_process_group()


class CaptureTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fp8a_capture_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def _check_common(self, tr, seen, captured_steps, nsteps, micro_batch=0, autocast=False):
        cap = tr.cap
        names = ["%s.%s" % (l, r) for l in ("0", "2") for r in ("activation", "weight", "gradient")]
        want_files = ["rank0_step_%06d.safetensors" % s for s in captured_steps]
        got_files = sorted(f for f in os.listdir(self.dir) if f.endswith(".safetensors"))
        self.assertEqual(got_files, want_files)
        self.assertEqual(sorted(seen), list(captured_steps))
        inspected = run_inspect(self.dir)
        self.assertEqual(len(inspected), len(captured_steps) * len(names))
        trace = read_trace(os.path.join(self.dir, "amax_trace_rank0.csv"))
        self.assertEqual(set(trace), {(s, n) for s in range(nsteps) for n in names})
        want_dt = torch.bfloat16 if autocast else torch.float32
        for s in captured_steps:
            meta, tensors, header = read_safetensors(
                os.path.join(self.dir, want_files[list(captured_steps).index(s)]))
            self.assertEqual(meta["step"], str(s))
            self.assertEqual(meta["rank"], "0")
            self.assertEqual(meta["world_size"], "1")
            self.assertEqual(meta["micro_batch"], str(micro_batch))
            self.assertEqual(meta["autocast"], "bfloat16" if autocast else "off")
            self.assertEqual(list(tensors), names)
            for n in names:
                t = tensors[n]
                self.assertEqual(t.dtype, want_dt if not n.endswith("gradient") or autocast
                                 else torch.float32, n)
                # bytes in the file == what the hook saw
                self.assertTrue(torch.equal(t, seen[s][n]), n)
                # == what the model computed (independent of the hook)
                layer, role = n.split(".")
                if role == "weight":
                    ref = tr.weights[s][layer + ".weight"]
                elif role == "gradient":
                    ref = tr.dy[(s, micro_batch)][layer]
                elif layer == "0":
                    ref = tr.inputs[(s, micro_batch)]
                else:
                    ref = None
                if ref is not None:
                    self.assertTrue(torch.equal(t, ref.to(t.dtype)), n)
                if layer == "0" and role == "activation":
                    self.assertEqual(list(t.shape), [4, 3, 16])  # leading dims kept
                # inspect: dtype, shape, amax (6 significant digits)
                dt, shape, am = inspected[(s, n)]
                self.assertEqual(dt, header[n]["dtype"])
                self.assertEqual(shape, list(t.shape))
                self.assertAlmostEqual(am, amax(t), delta=1e-5 * amax(t))
                # trace at a captured step == the captured tensor's amax when one micro-batch
                if tr.mbs == 1:
                    self.assertEqual(trace[(s, n)], amax(t), n)
        # trace at every step == the test's own amaxes (max over micro-batches)
        for (s, n), v in trace.items():
            self.assertEqual(v, tr.amaxes[(s, n)], (s, n))

    def _run(self, nsteps=4, micro_batches=1, autocast=False, **kw):
        seen = {}

        def keep(step, tensors):
            seen[step] = {k: v.clone() for k, v in tensors.items()}

        model = make_model()
        cap = fp8a_capture.attach(model, self.dir, on_capture=keep, **kw)
        self.assertEqual(cap.layers, ["0", "2"])
        tr = Trainer(model, cap, micro_batches=micro_batches, autocast=autocast)
        tr.train(nsteps)
        cap.detach()
        return tr, seen

    def test_step_list(self):
        tr, seen = self._run(steps=[1, 3])
        self._check_common(tr, seen, [1, 3], 4)

    def test_run_replays_delayed_scaling_exactly(self):
        tr, seen = self._run(steps=[1, 3])
        out = os.path.join(self.dir, "out")
        p = subprocess.run([BINARY, "run", "--capture", self.dir, "--amax-trace",
                            os.path.join(self.dir, "amax_trace_rank0.csv"), "--out", out,
                            "--recipes", "delayed,delayed:history=16:algo=most_recent"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        import csv
        with open(os.path.join(out, "metrics.csv")) as f:
            rows = [r for r in csv.DictReader(f) if r["recipe"].startswith("delayed")]
        self.assertTrue(rows)
        self.assertEqual({r["replay"] for r in rows}, {"exact"})
        self.assertEqual({int(r["step"]) for r in rows}, {1, 3})

    def test_distributed_per_rank_files(self):
        import multiprocessing
        import torch.distributed as dist

        if not dist.is_available():
            self.skipTest("torch.distributed not available")
        ctx = multiprocessing.get_context("fork")
        init_file = os.path.join(self.dir, "pg_init")
        procs = [ctx.Process(target=_dist_worker, args=(r, 2, init_file, self.dir))
                 for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            self.assertEqual(p.exitcode, 0)
        files = sorted(f for f in os.listdir(self.dir) if f != "pg_init")
        self.assertEqual(files, ["amax_trace_rank0.csv", "amax_trace_rank1.csv",
                                 "rank0_step_000001.safetensors", "rank1_step_000001.safetensors"])
        for r in range(2):
            meta, tensors, _ = read_safetensors(
                os.path.join(self.dir, "rank%d_step_000001.safetensors" % r))
            self.assertEqual((meta["rank"], meta["world_size"], meta["step"]), (str(r), "2", "1"))
            self.assertEqual(len(read_trace(os.path.join(self.dir, "amax_trace_rank%d.csv" % r))), 12)
        # one rank's files are one capture for fp8-advisor
        one = os.path.join(self.dir, "rank1_step_000001.safetensors")
        self.assertEqual(len(run_inspect(one)), 6)
        # both ranks: fp8-advisor merges the shards of each (step, layer, role) by the metadata's
        # rank, and the two traces (max over the ranks) replay delayed scaling exactly
        out = os.path.join(self.dir, "out")
        p = subprocess.run([BINARY, "run", "--capture", self.dir, "--amax-trace",
                            os.path.join(self.dir, "amax_trace_rank0.csv"),
                            os.path.join(self.dir, "amax_trace_rank1.csv"), "--out", out,
                            "--recipes", "current,delayed"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        import csv
        with open(os.path.join(out, "metrics.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual({(r["layer"], r["tensor"]) for r in rows},
                         {(l, r) for l in ("0", "2") for r in ("activation", "weight", "gradient")})
        self.assertEqual({r["ranks"] for r in rows}, {"2"})
        self.assertEqual({r["replay"] for r in rows if r["recipe"].startswith("delayed")},
                         {"exact"})

    def test_every(self):
        tr, seen = self._run(every=2)
        self._check_common(tr, seen, [0, 2], 4)

    def test_range_and_every_union(self):
        tr, seen = self._run(steps=range(3, 4), every=2)
        self._check_common(tr, seen, [0, 2, 3], 4)

    def test_autocast_bf16(self):
        tr, seen = self._run(steps=[1], autocast=True)
        self._check_common(tr, seen, [1], 4, autocast=True)
        meta, tensors, header = read_safetensors(os.path.join(self.dir, "rank0_step_000001.safetensors"))
        self.assertEqual(header["0.activation"]["dtype"], "BF16")
        self.assertEqual(json.loads(meta["source_dtypes"])["0.activation"], "float32")

    def test_gradient_accumulation(self):
        for mb in (0, 1):
            shutil.rmtree(self.dir)
            os.makedirs(self.dir)
            tr, seen = self._run(steps=[1, 2], micro_batches=2, micro_batch=mb)
            self._check_common(tr, seen, [1, 2], 4, micro_batch=mb)
            # the two micro-batches differ, so this really is micro-batch mb
            other = tr.inputs[(1, 1 - mb)]
            self.assertFalse(torch.equal(seen[1]["0.activation"], other))

    def test_name_regex(self):
        model = make_model()
        cap = fp8a_capture.attach(model, self.dir, steps=[0], name_regex=r"^2$")
        self.assertEqual(cap.layers, ["2"])
        cap.detach()

    def test_keyword_input(self):
        # linear(input=x): on PyTorch >= 2.0 the hook sees it (with_kwargs=True); 1.13's forward
        # hooks get positional arguments only, so there is no activation to capture.
        lin = torch.nn.Linear(4, 3)
        x = torch.randn(5, 4, requires_grad=True)
        seen = {}
        cap = fp8a_capture.attach(torch.nn.Sequential(lin), self.dir, steps=[0],
                                  on_capture=lambda step, t: seen.update(t))
        lin(input=x).sum().backward()
        cap.step()
        cap.detach()
        self.assertIn("0.weight", seen)
        self.assertIn("0.gradient", seen)
        if fp8a_capture._FORWARD_HOOK_KWARGS:
            self.assertTrue(torch.equal(seen["0.activation"], x.detach()))
        else:
            self.assertNotIn("0.activation", seen)

    def test_detach_and_no_retained_references(self):
        model = make_model()
        with fp8a_capture.attach(model, self.dir, every=1) as cap:
            self.assertTrue(any(len(m._forward_hooks) for m in model.modules()))
            x, y = batch(0)
            out = model(x)
            ((out - y) ** 2).mean().backward()
            refs = [weakref.ref(x), weakref.ref(out)]
            del x, out
            cap.step()
            self.assertEqual(cap._pending, {})
            self.assertEqual(cap._amax, {})
            import gc
            gc.collect()
            self.assertTrue(all(r() is None for r in refs), "hook kept a reference")
        for m in model.modules():
            self.assertEqual(len(m._forward_hooks), 0)
            self.assertEqual(len(m._forward_pre_hooks), 0)
            self.assertEqual(len(m._backward_hooks), 0)
        # after detach, training records nothing more
        before = read_text(os.path.join(self.dir, "amax_trace_rank0.csv"))
        out = model(batch(1)[0])
        out.sum().backward()
        cap.step()
        self.assertEqual(read_text(os.path.join(self.dir, "amax_trace_rank0.csv")), before)

    def test_absmax_matches_amax_abs(self):
        # the hook's one-pass amax (aminmax, with an amax(|x|) fallback) == torch.amax(x.abs())
        g = torch.Generator().manual_seed(7)
        for dt in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
            for n in (1, 7, 16, 33, 1000, 4097):
                for special in (None, float("nan"), float("inf"), -float("inf")):
                    t = (torch.randn(n, generator=g) * 10).to(dt)
                    if special is not None:
                        t[(n * 5) // 7] = special
                    try:
                        ref = torch.amax(t.abs())
                    except RuntimeError:  # dtype without abs/amax on this build
                        continue
                    got = fp8a_capture._absmax(t)
                    self.assertEqual(got.dtype, t.dtype)
                    self.assertTrue(torch.equal(got, ref) or (bool(torch.isnan(ref))
                                                              and bool(torch.isnan(got))),
                                    (dt, n, special, got, ref))
        # non-contiguous, and signed zeros give +0.0
        t = torch.randn(8, 6, generator=g).t()
        self.assertTrue(torch.equal(fp8a_capture._absmax(t), torch.amax(t.abs())))
        self.assertEqual(repr(float(fp8a_capture._absmax(-torch.zeros(5)))), "0.0")

    def test_no_warnings_from_hook(self):
        # deprecated PyTorch APIs (e.g. torch.is_autocast_cpu_enabled on >= 2.4) warn: none may
        # come from the hook, with or without autocast
        import warnings

        hook_file = os.path.splitext(os.path.abspath(fp8a_capture.__file__))[0]
        for autocast in (False, True):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = make_model()
                cap = fp8a_capture.attach(model, self.dir, steps=[1])
                Trainer(model, cap, autocast=autocast).train(2)
                cap.detach()
            ours = [w for w in caught
                    if os.path.splitext(os.path.abspath(w.filename))[0] == hook_file]
            self.assertEqual([str(w.message) for w in ours], [], "autocast=%s" % autocast)

    def test_nan_propagates(self):
        model = make_model()
        cap = fp8a_capture.attach(model, self.dir, steps=[])
        x, _ = batch(0)
        x[0, 0, 3] = float("nan")
        with torch.no_grad():
            model(x)
        cap.step()
        cap.detach()
        trace = read_trace(os.path.join(self.dir, "amax_trace_rank0.csv"))
        self.assertTrue(math.isnan(trace[(0, "0.activation")]))
        self.assertIn("0,0.activation,nan", read_text(os.path.join(self.dir, "amax_trace_rank0.csv")))
        self.assertNotIn((0, "0.gradient"), trace)  # no backward: no gradient row


    def _run_default(self, out):
        return subprocess.run([BINARY, "run", "--capture", self.dir, "--out", out, "--quiet"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)

    def test_tokens_per_step_counted_and_priced_by_run(self):
        # 2 micro-batches of X [4, 3, 16]: 24 token rows a step on the one rank; `run` with
        # default options prices the GEMMs at that count and says where it came from.
        tr, _ = self._run(steps=[1, 3], micro_batches=2)
        for s in (1, 3):
            meta, _, _ = read_safetensors(os.path.join(self.dir, "rank0_step_%06d.safetensors" % s))
            self.assertEqual((meta["tokens_per_step"], meta["tokens_per_step_source"]), ("24", "counted"))
        p = self._run_default(os.path.join(self.dir, "out"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("(cost: roofline at 24 tokens a step (counted by fp8a_capture in %s/rank0_step_000001"
                      ".safetensors))" % self.dir, p.stdout)
        with open(os.path.join(self.dir, "out", "summary.json")) as f:
            self.assertEqual(json.load(f)["decision"]["cost_source"], "roofline")

    def test_tokens_per_step_given(self):
        self._run(steps=[1], tokens_per_step=4194304)
        meta, _, _ = read_safetensors(os.path.join(self.dir, "rank0_step_000001.safetensors"))
        self.assertEqual((meta["tokens_per_step"], meta["tokens_per_step_source"]), ("4194304", "given"))
        p = self._run_default(os.path.join(self.dir, "out"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("roofline at 4194304 tokens a step (recorded in ", p.stdout)
        for bad in (0, 10 ** 12 + 1):
            with self.assertRaises(ValueError):
                fp8a_capture.attach(make_model(), self.dir, tokens_per_step=bad)

    def test_tokens_per_step_unknown_under_distributed_without_data_parallel_size(self):
        # As under torch.distributed with 2 ranks (tensor- or data-parallel: the hook cannot tell).
        real = fp8a_capture._dist_rank_world
        fp8a_capture._dist_rank_world = lambda: (0, 2)
        try:
            model = make_model()
            cap = fp8a_capture.attach(model, self.dir, steps=[0])
            with self.assertWarnsRegex(UserWarning, "tokens per step not recorded .*data_parallel_size"):
                Trainer(model, cap).train(1)
            cap.detach()
            meta, _, _ = read_safetensors(os.path.join(self.dir, "rank0_step_000000.safetensors"))
            self.assertNotIn("tokens_per_step", meta)
            # data_parallel_size given: counted times it
            model = make_model()
            cap = fp8a_capture.attach(model, os.path.join(self.dir, "dp"), steps=[0], data_parallel_size=2)
            Trainer(model, cap).train(1)
            cap.detach()
            meta, _, _ = read_safetensors(os.path.join(self.dir, "dp", "rank0_step_000000.safetensors"))
            self.assertEqual(meta["tokens_per_step"], "24")
        finally:
            fp8a_capture._dist_rank_world = real

    def test_capture_mistakes_warn(self):
        # no_grad: no gradient reaches the hooks, the captured step says so
        model = make_model()
        cap = fp8a_capture.attach(model, self.dir, steps=[0])
        with self.assertWarnsRegex(UserWarning, "step 0: no gradient reached the hooks"):
            with torch.no_grad():
                model(batch(0)[0])
            cap.step()
        cap.detach()
        # step() never called
        model = make_model()
        cap = fp8a_capture.attach(model, os.path.join(self.dir, "b"), steps=[5])
        for i in range(3):
            model(batch(i)[0]).sum().backward()
        with self.assertWarnsRegex(UserWarning, r"step\(\) was never called"):
            cap.detach()
        # steps asked for beyond the end of training
        model = make_model()
        cap = fp8a_capture.attach(model, os.path.join(self.dir, "c"), steps=[1, 50, 60])
        with self.assertWarnsRegex(UserWarning, r"requested step\(s\) 50, 60 never reached: the last step was 2"):
            Trainer(model, cap).train(3)
            cap.detach()

    def test_grouped_linear_experts(self):
        """A GroupedLinear (TE's interface, a stand-in: TE's kernels need a GPU) is captured per
        expert: expert i's rows of X and of dY by m_splits, its own weight{i}; an expert that got
        no token records its weight only; checked against the model's own tensors."""
        mod = MoeBlock()
        cap = fp8a_capture.attach(mod, self.dir, steps=[0, 1], grouped_module_types=(StandInGroupedLinear,))
        experts = ["experts.expert%d" % i for i in range(3)]
        self.assertEqual(cap.layers, experts)
        want = {}
        for step, splits in ((0, [2, 0, 4]), (1, torch.tensor([3, 2, 1]))):
            x = torch.randn(6, 16, generator=torch.Generator().manual_seed(step))
            # By keyword only where forward hooks see keywords (PyTorch >= 2.0; Megatron's
            # TEGroupedMLP passes both positionally).
            out = mod(x, splits, by_keyword=step == 1 and fp8a_capture._FORWARD_HOOK_KWARGS)
            out.retain_grad()
            (out ** 2).sum().backward()
            bounds = [0, 2, 2, 6] if step == 0 else [0, 3, 5, 6]
            for i, e in enumerate(experts):
                want[(step, e + ".weight")] = getattr(mod.experts, "weight%d" % i).detach().clone()
                if bounds[i + 1] > bounds[i]:
                    want[(step, e + ".activation")] = x[bounds[i]:bounds[i + 1]]
                    want[(step, e + ".gradient")] = out.grad[bounds[i]:bounds[i + 1]].detach().clone()
            cap.step()
        # A forward whose splits do not fit the experts: said once, nothing recorded.
        with self.assertWarnsRegex(UserWarning, "experts: no input and m_splits with one split per expert"):
            mod(torch.randn(4, 16), [4, 0])
        cap.detach()
        for step in (0, 1):
            _, tensors, _ = read_safetensors(os.path.join(self.dir, "rank0_step_%06d.safetensors" % step))
            names = sorted(n for (s, n) in want if s == step)
            self.assertEqual(sorted(tensors), names)
            for n in names:
                self.assertTrue(torch.equal(tensors[n], want[(step, n)]), (step, n))
        self.assertNotIn("experts.expert1.activation", read_safetensors(
            os.path.join(self.dir, "rank0_step_000000.safetensors"))[1])
        trace = read_trace(os.path.join(self.dir, "amax_trace_rank0.csv"))
        self.assertEqual(set(trace), set(want))
        for key, t in want.items():
            self.assertEqual(trace[key], amax(t), key)
        inspected = run_inspect(self.dir)
        self.assertEqual(set(inspected), set(want))

    def test_empty_input_is_not_recorded(self):
        """A linear that got no row in the captured step (an MoE expert without tokens, as
        Megatron's SequentialMLP runs it) records its weight only: the capture stays readable."""
        lin = torch.nn.Linear(4, 3)
        cap = fp8a_capture.attach(torch.nn.Sequential(lin), self.dir, steps=[0])
        x = torch.randn(0, 4, requires_grad=True)
        lin(x).sum().backward()
        cap.step()
        cap.detach()
        _, tensors, _ = read_safetensors(os.path.join(self.dir, "rank0_step_000000.safetensors"))
        self.assertEqual(sorted(tensors), ["0.weight"])
        self.assertEqual(set(run_inspect(self.dir)), {(0, "0.weight")})


class StandInGroupedLinear(torch.nn.Module):
    """TE's GroupedLinear as the hook sees it (transformer_engine/pytorch/module/grouped_linear.py:
    num_gemms, parameters weight0 .. weight{n-1} of [out, in], forward(inp, m_splits) with expert
    i's GEMM on its split of inp's rows, the output [tokens, out])."""

    def __init__(self, n, fin, fout):
        super().__init__()
        self.num_gemms = n
        g = torch.Generator().manual_seed(7)
        for i in range(n):
            self.register_parameter("weight%d" % i, torch.nn.Parameter(torch.randn(fout, fin, generator=g) * 0.1))

    def forward(self, inp, m_splits, is_first_microbatch=None):
        splits = m_splits.tolist() if torch.is_tensor(m_splits) else list(m_splits)
        outs, off = [], 0
        for i, m in enumerate(splits):
            outs.append(inp[off:off + m] @ getattr(self, "weight%d" % i).t())
            off += m
        return torch.cat(outs)


class MoeBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = StandInGroupedLinear(3, 16, 8)

    def forward(self, x, splits, by_keyword=False):
        return self.experts(inp=x, m_splits=splits) if by_keyword else self.experts(x, splits)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: test_hook.py PATH_TO_fp8-advisor [unittest args]")
        sys.exit(2)
    BINARY = os.path.abspath(sys.argv[1])
    print("torch %s (%s)" % (torch.__version__, sys.executable), file=sys.stderr)
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:], verbosity=2)
