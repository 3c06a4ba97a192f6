"""Where the workshop's files are, from `helpers.__file__`: the same wherever the notebook or shell was started.

`data/` sits beside the `helpers` package in the workshop folder, so these paths hold for a checkout
on `sys.path` or installed with `pip install -e` (what `./workshop` and the Colab setup cell do). A
plain `pip install` copies only the package, so it is refused here with the fix, not later with a
confusing FileNotFoundError.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the workshop folder, wherever it was cloned
DATA = ROOT / "data"
# What a laptop installs, exactly (helpers.runtime.install.install_lock; helpers.maintainers.lock writes them): the lab's
# packages, and for the tests the lab's and the test tools.
LOCK = ROOT / "requirements.lock"
TEST_LOCK = ROOT / "requirements-test.lock"

if not DATA.is_dir():
    raise ImportError(f"the workshop's data folder is missing ({DATA}): `helpers` must be used from its "
                      "checkout, installed with `pip install -e <workshop folder>`, not copied by a plain install")
