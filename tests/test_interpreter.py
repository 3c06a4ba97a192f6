"""A workshop module run with another Python than the workshop's ends in one line that names the right one."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_without_packages(*args: str) -> subprocess.CompletedProcess:
    # -S: no site-packages, so the workshop's packages are missing, as from the system's python3; `helpers` is
    # still found in the working folder, as from a checkout.
    return subprocess.run([sys.executable, "-S", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_module_run_with_the_wrong_python_says_which_to_use_in_one_line():
    result = run_without_packages("-m", "helpers.compare", "--n", "2")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert "helpers.compare needs the package" in result.stderr and sys.executable in result.stderr
    assert "./workshop run helpers.compare" in result.stderr and ".venv/bin/python -m helpers.compare" in result.stderr


def test_a_module_that_needs_no_package_still_runs():
    result = run_without_packages("-m", "helpers.runtime.install")
    assert "usage: python -m helpers.runtime.install" in result.stdout + result.stderr


def test_an_import_outside_a_command_line_changes_nothing():
    probe = "import sys, helpers; print(sys.excepthook is sys.__excepthook__)"
    assert subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True).stdout == "True\n"
