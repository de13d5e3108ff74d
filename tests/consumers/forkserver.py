"""forkserver.py MODULE ...: imports the MODULEs once (torch, megatron.core: seconds each), then
runs each checker a request names in a fork of itself, so that every case still starts from a
fresh interpreter state but none pays the imports again (run_checks.py; each of its cases was a
process of its own, ~5 s of imports apiece under Megatron).

Requests on stdin, one JSON line each: ["checker.py", "arg", ...]. The answer, one JSON line on
stdout: {"rc": exit status, "stdout": ..., "stderr": ...}, as `python checker.py arg ...` run in
this directory's environment would give them. Run it as the checkers are run (the consumers' venv,
the same environment variables and working directory); a module a checker would import from
elsewhere (FP8A_MEGATRON_SRC's megatron) must not be preloaded."""
import importlib
import json
import os
import runpy
import sys
import tempfile
import traceback


def run_case(argv):
    """The child: argv[0] run as __main__ with fds 1 and 2 in files; returns (rc, out, err)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.argv = list(argv)
                sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
                try:
                    runpy.run_path(argv[0], run_name="__main__")
                    code = 0
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                    if not isinstance(e.code, int) and e.code is not None:
                        print(e.code, file=sys.stderr)
                except BaseException:  # as the interpreter reports an uncaught exception
                    traceback.print_exc()
                    code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return rc, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")


def main():
    # The imports' warnings (no CUDA runtime, no TE or Apex) said once here would be noise in
    # every test's log: kept, and shown only when an import fails.
    saved = os.dup(2)
    with tempfile.TemporaryFile() as said:
        os.dup2(said.fileno(), 2)
        try:
            for name in sys.argv[1:]:
                importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            said.seek(0)
            os.write(saved, said.read())
            return 1
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
    answers = os.fdopen(os.dup(1), "w")
    for line in sys.stdin:
        rc, out, err = run_case(json.loads(line))
        answers.write(json.dumps({"rc": rc, "stdout": out, "stderr": err}) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
