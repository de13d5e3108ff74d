"""TE's own debug features (transformer_engine/debug/features of the TE sources in the venv) made
loadable by nvdlfw_inspect on a CPU.

Those files import transformer_engine.pytorch for tensor and quantizer types they use only when a
tensor is quantized or logged; that package needs TE's CUDA extension. So transformer_engine.pytorch
and its submodules are stand-ins whose every attribute is an inert class, and `transformer_engine`
and `transformer_engine.common` are bare packages over TE's source folders (their __init__ loads
TE's library). Everything else is TE's file as released: the namespace API (api.py: the default
answers, the routing and config parsing), every feature class, the recipe module, the debug state.
Enough for the calls that decide (fp8_gemm_enabled, inspect_tensor_enabled), not for running one
on a tensor."""
import importlib.abc
import importlib.machinery
import os
import sys
import types

from _common import TE_SRC, CheckFailed

# TE's PyTorch package, and (TE 2.4's per_tensor_scaling.py imports it directly) its extension.
_STANDINS = ("transformer_engine.pytorch", "transformer_engine_torch")


class _AnyAttribute(type):
    def __getattr__(cls, name):
        return _Inert


class _Inert(metaclass=_AnyAttribute):
    def __init__(self, *args, **kwargs):
        pass


class _StandIn(types.ModuleType):
    __path__ = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if any(name == s or name.startswith(s + ".") for s in _STANDINS):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StandIn(spec.name)

    def exec_module(self, module):
        pass


def te_debug_features():
    """Makes TE's debug features importable; returns their folder, nvdlfw's feature_dirs entry.
    Import Megatron before: with these packages in sys.modules it would take TE as installed."""
    root = os.path.join(TE_SRC, "transformer_engine")
    features = os.path.join(root, "debug", "features")
    if not os.path.isfile(os.path.join(features, "api.py")):
        raise CheckFailed("TE's debug features not found at %s (run scripts/consumers-env.sh)" % features)
    if not any(isinstance(f, _StandInFinder) for f in sys.meta_path):
        for name, folder in (("transformer_engine", root), ("transformer_engine.common", os.path.join(root, "common"))):
            package = types.ModuleType(name)
            package.__path__ = [folder]
            sys.modules[name] = package
        sys.meta_path.insert(0, _StandInFinder())
    return features
