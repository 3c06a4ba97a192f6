"""No password the store's users have, nor one a task's instruction gives, appears in what the repository shows a
reader: the executed notebooks' outputs, the benchmark records, the docs; nor does a partial mask of one (its first
and last letters around stars, or a row of dots as long as it). The instructions themselves (data/) are where
passwords belong; everything derived from them conceals them."""
import json
import re
from pathlib import Path

import pytest

from helpers.instruction import passwords
from helpers.world.store import MASK, PASSWORD_SHOWN, account_passwords
from helpers.world.tasks import injected_tasks, instruction, load_tasks, start_app

ROOT = Path(__file__).resolve().parent.parent


def credentials() -> set[str]:
    """Every password the store can give its account, on any seed, and every one a task's instruction gives."""
    found = set(account_passwords())
    for task in {t.id: t for t in [*load_tasks(), *injected_tasks()]}.values():
        app = start_app(task, 0)
        found |= {app.password, *passwords(instruction(task, app))}
    return found


def outputs(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return json.dumps([cell.get("outputs", []) for cell in cells if cell["cell_type"] == "code"])


SHOWN = [*sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")), *sorted((ROOT / "docs").glob("*.json")),
         *sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def test_the_credentials_searched_for_are_real():
    assert {"open sesame"} < credentials() and {start_app(load_tasks()[0], seed).password for seed in range(500)} \
        <= credentials()


@pytest.mark.parametrize("path", SHOWN, ids=lambda p: p.name)
def test_no_credential_in_what_a_reader_sees(path):
    text = outputs(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
    assert [c for c in credentials() if c in text] == []


@pytest.mark.parametrize("path", SHOWN, ids=lambda p: p.name)
def test_no_partial_mask_of_a_credential_in_what_a_reader_sees(path):
    text = outputs(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
    text = text.encode().decode("unicode_escape", errors="ignore") if path.suffix == ".ipynb" else text
    stars = [c for c in credentials() if re.search(re.escape(c[0]) + r"\*+" + re.escape(c[-1]), text)]
    dots = {len(run) for run in re.findall(f"{MASK}+", text)} - {len(PASSWORD_SHOWN)}
    assert (stars, dots) == ([], set())
