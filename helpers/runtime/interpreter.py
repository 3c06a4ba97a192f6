"""Which Python runs the workshop's modules: `./workshop run MODULE`, or `.venv/bin/python -m MODULE` once set up.

Another Python (the system's `python3`, say) finds `helpers` in the workshop folder but not the packages it needs,
and its first import fails. Run from a command line, that failure ends in one line naming the right Python, not
in a traceback. Plain enough for an old Python, since the wrong one may be old.
"""
import sys

FALLBACK_MODULE = "helpers.MODULE"


def module_run() -> str:
    """The module `python -m` was given on this command line."""
    argv = getattr(sys, "orig_argv", [])
    return next((argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "-m"), FALLBACK_MODULE)


def advice(module: str, missing: str) -> str:
    return (f"error: {module} needs the package {missing}, which {sys.executable} does not have. Run it with the "
            f"workshop's Python, from the workshop folder: ./workshop run {module} ... "
            f"(or .venv/bin/python -m {module} ..., once ./workshop has set up .venv)")


def explain_missing_packages() -> None:
    """From here on, a package this Python lacks ends the command with `advice` instead of a traceback."""
    previous = sys.excepthook

    def hook(kind, error, trace):
        name = getattr(error, "name", None) or ""
        if issubclass(kind, ModuleNotFoundError) and name and name.split(".")[0] != "helpers":
            print(advice(module_run(), name.split(".")[0]), file=sys.stderr)
        else:
            previous(kind, error, trace)

    sys.excepthook = hook
