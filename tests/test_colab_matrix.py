"""The Colab matrix: every notebook in a new Colab runtime rebuilt from what Colab publishes about itself, as a reader
who clicks each notebook's badge meets it, running what only Colab's versions can break.

- The image: a virtual environment on Colab's Python with the versions of tests/colab_versions.txt (Colab's own
  list: where it comes from, its date and what it leaves out are written there), installed first, from wheels; and
  one on the Python of the older runtime a reader can pin, for notebook 00.
- Each notebook gets a new runtime, as each badge opens one: an empty virtual environment over that image, a new
  folder, a server port of its own, the `google.colab` stand-in imported at start-up, no API key.
- The notebook's own setup cell clones the workshop (this checkout's HEAD, served as a local origin), installs it
  with `pip install -e`, and `prepare()` installs the embedded model with helpers.runtime.install, the code Colab
  runs. Then, in that kernel and in the notebook's order, the cells of `colab_cells`: the first model call, the first
  guided request and every widget, each with the cells it reads names from, and an import of every module the other
  cells import. Any error output fails the test. The other cells would repeat, on the same code and the same model,
  what nbval runs of every notebook.
- Not reproducible here: llama-cpp-python's CPU wheel index cannot be reached. The pinned wheel is put at hand
  through PIP_FIND_LINKS instead (this machine's, `install.machine_wheel`, which ./workshop built already), so the
  install's first attempt (`--only-binary llama-cpp-python`, that index as an extra index) finds it there; the test
  asserts that the first attempt succeeded and that nothing was compiled.

Cost on 2 cores: building the two images, about 2 minutes with a warm pip cache (downloads on a cold one); then for
each of the 8 cases a runtime's setup, about 30 s, and its cells: 7 to 125 s, 6 min 46 s for the seven notebooks
(measured in a local kernel with another model running, 2026-12-03; notebook 03's widget shows the model's runs on
three tasks, so its runtime runs them, short as WORKSHOP_QUICK makes them: most of its 125 s).
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from colab_stage import ADDRESS, ROOT, colab_env, git, origin
from helpers.runtime import install
from helpers.maintainers.publish import notebooks
from test_reading_time import names, parsed  # pytest puts tests/ on the path

VERSIONS = Path(__file__).with_name("colab_versions.txt")
COLAB_PYTHON = re.search(r"^# Python (\d+\.\d+)\b", VERSIONS.read_text(), re.MULTILINE)[1]
PINNABLE_PYTHON = re.search(r"pinnable \S+ runtime is Python (\d+\.\d+)", VERSIONS.read_text())[1]
NOTEBOOKS = [path.name for path in notebooks(ROOT)]
# Every notebook on the Python a badge opens; on the older runtime a reader can pin, the setup path and a first
# guided call (notebook 00), which is where a Python or numpy difference would show first, for a minute more.
MATRIX = [*((COLAB_PYTHON, name) for name in NOTEBOOKS), (PINNABLE_PYTHON, NOTEBOOKS[0])]
# The cells that build a widget: the matrix runs them on Colab's ipywidgets 7.
WIDGET = re.compile(r"\b(?:step_through|mask_explorer)\(")
# The connection the setup cell makes: every model call of a notebook goes through it.
CONNECTION = "conn"
# What Colab has and the workshop must not need (tests/colab_versions.txt says why they are left out of the matrix).
HEAVY = re.compile(r"^\s*(?:import|from)\s+(?:torch\w*|transformers|accelerate|llguidance\.(?:torch|hf))\b"
                   r"|import_module\(\s*['\"](?:torch\w*|transformers|accelerate)\b", re.MULTILINE)


def find_python(version: str) -> Path | None:
    """An interpreter of `version` that can make virtual environments: on PATH, else one pyenv installed."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    installed = sorted(pyenv.glob(f"versions/{version}.*/bin/python{version}"))
    for candidate in filter(None, [shutil.which(f"python{version}"), *installed]):
        found = subprocess.run([candidate, "-c", "import sys, venv; print(sys.executable)"], capture_output=True,
                               text=True)
        if found.returncode == 0:
            return Path(found.stdout.strip())
    return None


def run(*command: str | Path) -> str:
    """Run a command; its output, or a failure that shows the end of it."""
    result = subprocess.run(list(map(str, command)), capture_output=True, text=True)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
    return result.stdout


def site_packages(python: Path) -> str:
    return run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Callable[[str], Path]:
    """Colab's image on Python `version`, built once: a virtual environment with Colab's versions, from wheels only
    (nothing of Colab's own is compiled here)."""
    built: dict[str, Path] = {}

    def build(version: str) -> Path:
        if version not in built:
            python = find_python(version)
            if python is None:
                pytest.skip(f"the Colab matrix needs Python {version}, Colab's, and there is none here (neither "
                            f"python{version} on PATH nor a pyenv version {version}.x)")
            folder = tmp_path_factory.mktemp(f"colab-image-{version}")
            run(python, "-m", "venv", folder)
            run(folder / "bin" / "python", "-m", "pip", "install", "--only-binary", ":all:", "-r", VERSIONS)
            built[version] = folder / "bin" / "python"
        return built[version]

    return build


@pytest.fixture(scope="module")
def wheel_at_hand(tmp_path_factory) -> Path:
    """A folder standing in for the CPU index: the pinned llama-cpp-python wheel, built portably as its authors'
    release workflow builds the index's. It is this machine's (`install.machine_wheel`), which ./workshop built when
    it set up .venv: seconds; only where no ./workshop ran here does the first run build it (minutes, once)."""
    wheel = install.machine_wheel()
    folder = tmp_path_factory.mktemp("wheels")
    (folder / wheel.name).symlink_to(wheel)
    return folder


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    return origin(tmp_path_factory.mktemp("github"))


def calls_model(source: str) -> bool:
    """Whether a cell calls the model: through the connection's client, or by handing the connection to a call."""
    for node in ast.walk(parsed(source)):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        while isinstance(called, (ast.Attribute, ast.Call, ast.Subscript)):
            if isinstance(called, ast.Attribute) and called.attr == "client" and \
                    isinstance(called.value, ast.Name) and called.value.id == CONNECTION:
                return True
            called = called.func if isinstance(called, ast.Call) else called.value
        handed = [*node.args, *(keyword.value for keyword in node.keywords)]
        if any(isinstance(value, ast.Name) and value.id == CONNECTION for value in handed):
            return True
    return False


def colab_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The code cells a new Colab runtime runs of `notebook`, in its order: the setup cell, the first that calls the
    model, the first that asks for guided output and every one that builds a widget, each with the cells it needs;
    then one cell importing what the cells left out import."""
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    defined, read = zip(*(names(cell.source) for cell in code))

    def needed(number: int) -> set[int]:
        """The cell, the latest earlier cell defining each name it reads, and the cells those need in turn."""
        found, todo = set(), [number]
        while todo:
            if (current := todo.pop()) not in found:
                found.add(current)
                todo += [next(earlier for earlier in range(current - 1, -1, -1) if name in defined[earlier])
                         for name in read[current] - defined[current] if any(name in d for d in defined[:current])]
        return found

    model = [number for number, cell in enumerate(code) if number and calls_model(cell.source)]
    guided = [number for number in model if ".guided(" in code[number].source]
    widgets = [number for number, cell in enumerate(code) if WIDGET.search(cell.source)]
    chosen = set().union({0}, *map(needed, {*model[:1], *guided[:1], *widgets}))
    imports = dict.fromkeys(ast.unparse(node) for number, cell in enumerate(code) if number not in chosen
                            for node in ast.walk(parsed(cell.source)) if isinstance(node, (ast.Import, ast.ImportFrom)))
    return [code[number] for number in sorted(chosen)] + [nbformat.v4.new_code_cell("\n".join(imports))]


def new_runtime(image_python: Path, folder: Path, bare: Path, wheels: Path) -> tuple[Path, dict[str, str]]:
    """A new Colab runtime in `folder`: its Python (an empty virtual environment that sees the image's packages
    as its own) and its environment."""
    run(image_python, "-m", "venv", "--without-pip", folder / "venv")
    python = folder / "venv" / "bin" / "python"
    # A fresh known-paths set makes the image's folder count as added by this file: pip's isolated build
    # environment then strips it, as it strips Colab's system site-packages, and builds with its own setuptools.
    Path(site_packages(python), "colab-image.pth").write_text(
        f"import site; site.addsitedir({site_packages(image_python)!r}, set())\n")
    return python, {
        **os.environ,
        **colab_env(folder, bare),
        "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(python.parent.parent),
        "PIP_FIND_LINKS": " ".join(filter(None, [str(wheels), os.environ.get("PIP_FIND_LINKS")])),
        # The CPU index cannot be reached from here: a look-up of it fails at once instead of retrying for minutes.
        "PIP_RETRIES": "0",
        "PIP_DEFAULT_TIMEOUT": "15",
        "WORKSHOP_OWNER_PID": str(os.getpid()),  # a server left by a failed run stops with the test run
    }


def kernel_spec(python: Path, folder: Path) -> str:
    """A kernel that runs in `python`, found by its name once JUPYTER_PATH is `folder`."""
    spec = folder / "kernels" / "colab"
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Colab", "language": "python"}))
    return spec.name


def texts(cell: nbformat.NotebookNode) -> str:
    return "".join(output.get("text", "") for output in cell.get("outputs", []) if output.output_type == "stream")


def seconds(cell: nbformat.NotebookNode) -> float:
    timing = cell.metadata.get("execution", {})
    started, ended = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (started and ended):
        return float("nan")
    return (datetime.fromisoformat(ended.rstrip("Z")) - datetime.fromisoformat(started.rstrip("Z"))).total_seconds()


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize(("version", "name"), MATRIX)
def test_the_notebook_runs_in_a_new_colab_runtime(version, name, image, wheel_at_hand, bare, tmp_path, monkeypatch):
    """About 30 s of setup and 7 to 125 s of `colab_cells` on 2 cores (the module says more); the first case on each
    Python also waits for its image (about a minute from a warm pip cache)."""
    python, env = new_runtime(image(version), tmp_path, bare, wheel_at_hand)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))  # for this run's kernel spec, not the kernel's environment
    notebook = nbformat.reads(git("-C", bare, "show", f"{ADDRESS.branch}:notebooks/{name}"), as_version=4)
    notebook.cells = colab_cells(notebook)
    client = NotebookClient(notebook, kernel_name=kernel_spec(python, tmp_path), timeout=900, startup_timeout=120)
    started = time.monotonic()
    try:
        client.execute(cwd=str(tmp_path / "content"), env=env)
    except CellExecutionError as error:
        pytest.fail(f"{name} fails in a new Colab runtime (Python {version}, Colab's versions):\n{error}",
                    pytrace=False)
    finally:
        # From the runtime's folder: `helpers` is the clone's, whose server this is, not this checkout's.
        subprocess.run([python, "-c", "from helpers.runtime.embedded import stop_server; stop_server()"], env=env,
                       cwd=tmp_path / "content", capture_output=True, timeout=60)
    total = time.monotonic() - started
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    errors = [output for cell in code for output in cell.outputs if output.output_type == "error"]
    assert not errors, "\n".join(f"{e.ename}: {e.evalue}\n" + "\n".join(e.traceback[-6:]) for e in errors)
    printed_tracebacks = [texts(cell) for cell in code if "Traceback (most recent call last)" in texts(cell)]
    assert not printed_tracebacks, "\n\n".join(text[:2500] for text in printed_tracebacks)
    setup = texts(code[0])
    [(prebuilt, _), _] = install.embedded_steps([install.LLAMA_CPP])[0]  # the wheel first, then the source build
    assert f"done: {prebuilt}" in setup, f"the prebuilt wheel was not installed:\n{setup}"
    assert not re.search(r"building wheel for llama|from source", setup, re.IGNORECASE), setup
    assert "backend: embedded" in setup
    installed = re.findall(rf"^\[(\d\d:\d\d)\] done: {re.escape(prebuilt)}$", setup, re.MULTILINE)
    print(f"\n{name} on Python {version}: {total:.0f} s in all, the setup cell {seconds(code[0]):.0f} s "
          f"(llama-cpp-python from the wheel at hand in {installed[0] if installed else '?'})")


def test_the_matrix_runs_every_widget():
    """No model, a second. The widgets must work on Colab's ipywidgets 7 as on JupyterLab's 8: the matrix runs the
    notebooks' own widget cells, and each widget must be built in a cell it runs, in one notebook at least."""
    built = {found for path in notebooks(ROOT) for cell in colab_cells(nbformat.read(path, as_version=4))[:-1]
             for found in WIDGET.findall(cell.source)}
    assert built == {"step_through(", "mask_explorer("}


@pytest.mark.parametrize("path", notebooks(ROOT), ids=lambda path: path.name)
def test_every_runtime_calls_the_model(path):
    """No model, a second: each notebook's cells in the matrix include a model call, so a reader's first request
    on Colab's openai is made in every runtime."""
    cells = colab_cells(nbformat.read(path, as_version=4))
    assert any(calls_model(cell.source) for cell in cells[1:]), "every model call goes through the setup's `conn`"


@pytest.mark.parametrize(("source", "calls"), [
    ("reply = conn.client.chat.completions.create(model=conn.model, messages=[])", True),
    ("policy = ModelPolicy(conn, seed=0)", True),
    ("run = model_repair(connection=conn)", True),
    ("episode = run_episode(ModelPolicy(conn), task)[0]", True),
    ("fields = conn.profile.guided(schema)\nprint(conn.model)", False),
    ("%time x = 1\nother = connect()", False),
])
def test_a_model_call_is_a_call_through_the_connection(source, calls):
    """No model, instant."""
    assert calls_model(source) is calls


def test_the_cells_chosen_are_the_calls_the_widgets_and_what_they_read():
    """No model, instant: a notebook made up for it."""
    sources = ["conn = connect()", "import json\nunused = 1", "schema = {'type': 'object'}\nmessages = []",
               "plain = conn.client.create(messages=messages)", "from pathlib import Path\nmore = json.dumps(schema)",
               "guided = conn.client.create(messages=messages, **conn.profile.guided(schema))",
               "import base64\nruns = [conn.client.create(seed=seed) for seed in range(2)]",
               "from helpers.widgets.step_through import step_through\nstep_through(plain)",
               "from helpers.widgets.mask_view import mask_explorer\nmask_explorer(runs)"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# title"),
                                               *map(nbformat.v4.new_code_cell, sources)])
    *chosen, imports = colab_cells(notebook)
    assert [cell.source for cell in chosen] == [sources[0], *sources[2:4], *sources[5:]]
    assert imports.source == "import json\nfrom pathlib import Path"


def test_nothing_imports_what_the_matrix_leaves_out():
    modules = [*ROOT.glob("helpers/**/*.py"), *ROOT.glob("notebooks/solutions/*.py")]
    sources = {path: path.read_text() for path in modules}
    for path in notebooks(ROOT):
        sources[path] = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells
                                  if cell.cell_type == "code")
    found = {str(path.relative_to(ROOT)): HEAVY.findall(text) for path, text in sources.items() if HEAVY.search(text)}
    assert not found
