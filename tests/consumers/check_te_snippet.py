#!/usr/bin/env python3
"""check_te_snippet.py FILE: a te_snippet.py runs against Transformer Engine's own code.

TE's PyTorch package cannot be imported without libtransformer_engine, so the snippet runs with
`transformer_engine.common.recipe` being TE's real recipe module (loaded by path from TE_SRC) and
`transformer_engine.pytorch` a stand-in holding exactly the names TE's
transformer_engine/pytorch/__init__.py exports, each checked against the signature TE defines for
it (read with `ast` from the module that __init__ imports it from): an unknown name or keyword
fails, as does a recipe-class keyword that is not one of the class's fields. The snippet's forward() is then called on a stand-in model, which must be called once, under
an autocast given a recipe object of TE's class (or under none for a BF16 snippet)."""
import ast
import contextlib
import os
import sys
import types

from _common import TE_SRC, CheckFailed, main, require_file, te_recipe_module


def pytorch_exports():
    """name -> (module path, the function's or class __init__'s parameter names, takes **kwargs)."""
    root = os.path.join(TE_SRC, "transformer_engine", "pytorch")
    init = os.path.join(root, "__init__.py")
    if not os.path.isfile(init):
        raise CheckFailed("TE's transformer_engine/pytorch not found under %s" % TE_SRC)
    with open(init, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    where = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("transformer_engine.pytorch"):
            for a in node.names:
                where[a.asname or a.name] = (node.module, a.name)
    return where


def signature(module, name):
    path = os.path.join(TE_SRC, *module.split(".")) + ".py"
    if not os.path.isfile(path):
        path = os.path.join(TE_SRC, *module.split("."), "__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        fn = None
        if isinstance(node, ast.FunctionDef) and node.name == name:
            fn = node
        elif isinstance(node, ast.ClassDef) and node.name == name:
            fn = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
        if fn is not None:
            a = fn.args
            names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg != "self"]
            return names, a.kwarg is not None
    raise CheckFailed("%s: no def or class %s in %s" % (name, name, path))


def check(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    path = argv[0]
    require_file(path)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    code = compile(source, path, "exec")
    exports = pytorch_exports()
    recipe = te_recipe_module()
    # Each call of a TE recipe class names only the class's fields (TE's recipes take unknown
    # keywords silently).
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                isinstance(getattr(recipe, node.func.id, None), type):
            cls = getattr(recipe, node.func.id)
            fields = set()
            for k in cls.__mro__:
                fields |= set(getattr(k, "__annotations__", {}))
            for kw in node.keywords:
                if kw.arg not in fields:
                    raise CheckFailed("%s(%s=...): TE's %s has no field %s" % (
                        node.func.id, kw.arg, node.func.id, kw.arg))
    entered = []

    def stand_in(name):
        module, real = exports[name]
        params, var_kw = signature(module, real)

        def call(*args, **kwargs):
            unknown = [k for k in kwargs if k not in params]
            if unknown and not var_kw:
                raise CheckFailed("te.%s(%s): TE's %s.%s takes no %s" % (
                    name, ", ".join(kwargs), module, real, ", ".join(unknown)))
            entered.append((name, kwargs))
            return contextlib.nullcontext()
        return call

    te_pkg = types.ModuleType("transformer_engine")
    pytorch = types.ModuleType("transformer_engine.pytorch")
    pytorch.__getattr__ = lambda n: (stand_in(n) if n in exports else (_ for _ in ()).throw(
        CheckFailed("te.%s: not in TE's transformer_engine.pytorch (%s)" % (n, TE_SRC))))
    common = types.ModuleType("transformer_engine.common")
    te_pkg.pytorch, te_pkg.common, common.recipe = pytorch, common, recipe
    saved = {k: sys.modules.get(k) for k in ("transformer_engine", "transformer_engine.pytorch",
                                             "transformer_engine.common", "transformer_engine.common.recipe")}
    sys.modules.update({"transformer_engine": te_pkg, "transformer_engine.pytorch": pytorch,
                        "transformer_engine.common": common, "transformer_engine.common.recipe": recipe})
    env = dict(os.environ)
    try:
        scope = {"__name__": "te_snippet"}
        exec(code, scope)
        calls = []
        result = scope["forward"](lambda *a, **k: calls.append((a, k)) or "out", 1, x=2)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        set_env = {k: v for k, v in os.environ.items() if env.get(k) != v}
        os.environ.clear()
        os.environ.update(env)
    if result != "out" or calls != [((1,), {"x": 2})]:
        raise CheckFailed("forward() did not call the model once with its arguments and return its result")
    if not entered:
        return "%s: BF16, no autocast; the model called once" % os.path.basename(path)
    name, kwargs = entered[-1]
    given = kwargs.get("recipe", kwargs.get("fp8_recipe"))
    if not isinstance(given, recipe.Recipe):
        raise CheckFailed("te.%s got no TE recipe object (%r)" % (name, given))
    envs = "".join(" %s=%s" % kv for kv in sorted(set_env.items()))
    return "%s: te.%s(%s) with %s%s" % (os.path.basename(path), name, ", ".join(sorted(kwargs)),
                                       type(given).__name__, ("; env" + envs) if envs else "")


if __name__ == "__main__":
    sys.exit(main(check))
