"""What the consumer checkers share: the one-line verdict, file reading, TE's recipe module.

Each checker prints one line and exits 0 ("OK: ...") or 1 ("FAIL: <reason>"); 2 is a usage
error. They run in the venv of scripts/consumers-env.sh, where TE's pure-Python sources lie in
<venv>/share/fp8a/te (unpacked, not installed: see that script), the oldest claimed release's in
<venv>/share/fp8a/te-2.4.
"""
import importlib.util
import json
import os
import sys

# TE's sources: the newest release the docs claim; FP8A_TE_SRC names another (run_checks.py sets
# it to share/fp8a/te-2.4, the oldest, for its te_oldest cases).
TE_SRC = os.environ.get("FP8A_TE_SRC") or os.path.join(sys.prefix, "share", "fp8a", "te")
CAPTURE_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")


class CheckFailed(Exception):
    pass


def main(check):
    """Runs check(argv) -> str, maps it to the one-line verdict and the exit code."""
    try:
        ok = check(sys.argv[1:])
    except CheckFailed as e:
        print("FAIL: %s" % e)
        return 1
    except Exception as e:  # noqa: BLE001 - the consumer's own error is the verdict
        print("FAIL: %s: %s" % (type(e).__name__, " ".join(str(e).split())))
        return 1
    print("OK: %s" % ok)
    return 0


def read_json(path):
    if not os.path.isfile(path):  # the consumers' loaders treat a missing file as empty
        raise CheckFailed("%s: no such file" % path)
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise CheckFailed("%s: not JSON (%s)" % (path, e))


def require_file(path):
    if not os.path.isfile(path):
        raise CheckFailed("%s: no such file" % path)


def te_recipe_module(env=None, name="transformer_engine_common_recipe"):
    """TE's transformer_engine/common/recipe/__init__.py, loaded by path as module `name` (once;
    a second name gives a second copy) with TE's import-time environment variables unset (they
    change the defaults, see the NVTE_* reads in that file) except those of env, which are set."""
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(TE_SRC, "transformer_engine", "common", "recipe", "__init__.py")
    if not os.path.isfile(path):
        raise CheckFailed("TE's recipe module not found at %s (run scripts/consumers-env.sh)" % path)
    for k in [k for k in os.environ if k.startswith("NVTE_")]:
        del os.environ[k]
    os.environ.update(env or {})
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # pydantic resolves annotations through sys.modules[cls.__module__]
    spec.loader.exec_module(mod)
    return mod


def installed_module(name):
    """Module `name` of python/ as pip installed it into the venv (not from the source
    tree), checked to be the tree's current file: scripts/consumers-env.sh reinstalls it."""
    mod = importlib.import_module(name)
    src = os.path.join(CAPTURE_SRC, name + ".py")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(sys.prefix) + os.sep):
        raise CheckFailed("%s imported from %s, not from the venv %s" % (name, mod.__file__, sys.prefix))
    with open(mod.__file__, "rb") as a, open(src, "rb") as b:
        if a.read() != b.read():
            raise CheckFailed("%s in %s is not python/%s.py: run scripts/consumers-env.sh"
                              % (name, sys.prefix, name))
    return mod
