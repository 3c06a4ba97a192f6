"""The data folder comes from `helpers.__file__`: found from any working directory, refused clearly when absent."""
import shutil
import subprocess
import sys
from pathlib import Path

import helpers
from helpers import assistant, compare, steps
from helpers.runtime import paths
from helpers.world import tasks

CHECKOUT = Path(__file__).resolve().parent.parent


def test_the_data_folder_is_the_one_beside_the_package():
    assert paths.ROOT == Path(helpers.__file__).resolve().parent.parent == CHECKOUT
    assert paths.DATA == CHECKOUT / "data" and (paths.DATA / "knowledge_base.json").is_file()
    assert paths.LOCK.is_file() and paths.TEST_LOCK.is_file()


def test_every_module_reads_the_one_constant():
    assert tasks.TASKS_FILE.parent == paths.DATA and compare.DATA is paths.DATA
    assert steps.load_example_steps() and assistant.load_evals() and tasks.load_tasks()


def test_helpers_finds_its_data_from_any_working_directory(tmp_path):
    code = "from helpers.runtime import paths; from helpers.world import tasks; print(paths.DATA, len(tasks.load_tasks()))"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert result.stdout.split()[0] == str(paths.DATA)


def test_a_copy_without_the_data_folder_says_how_to_install(tmp_path):
    # What a plain (non-editable) `pip install` would leave: the package without data/ beside it.
    shutil.copytree(CHECKOUT / "helpers", tmp_path / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run([sys.executable, "-c", "import helpers.runtime.paths"], cwd=tmp_path, capture_output=True,
                            text=True, env={"PYTHONPATH": str(tmp_path), "PATH": ""})
    assert result.returncode != 0 and "pip install -e" in result.stderr and "data folder is missing" in result.stderr
