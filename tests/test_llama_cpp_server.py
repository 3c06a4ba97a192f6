"""The workshop against an OpenAI-compatible server nobody here wrote: llama-cpp-python's own.

`python -m llama_cpp.server` (the `llama-cpp-python[server]` extra) serves the bundled SmolLM2 on
127.0.0.1. It speaks `response_format={"type": "json_object", "schema": ...}`, refuses the
`json_schema` form with a 500, and accepts fields it does not know without enforcing them: the
case the probe exists for. It refuses image parts (a 500), so the workshop treats its model as text-only.
The probe, the grid and the pre-class check point the workshop at it the way a reader would point it at vLLM, with
OPENAI_BASE_URL and no WORKSHOP_DIALECT. Every notebook runs on it top to bottom with no error output through the
NVIDIA backend's own code path (NVIDIA_BASE_URL, as for a NIM a room runs): a server that accepts `nvext` and
ignores it, so the backend must find another dialect before it trusts one (issue 49; tests/test_nvidia_path.py runs
them against one that refuses it).

The root conftest.py forces the embedded backend for the test run and nbval compares outputs, so
everything here runs with its own environment: the in-process checks through monkeypatch, the
notebook in a kernel started by nbclient, the grid and the pre-class check in subprocesses.

Cost: 9 min 44 s on 2 cores for the file (2026-12-02), nearly all of it the seven notebooks, whose long measurements
run at WORKSHOP_QUICK's size as the whole test run sets it.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import nbformat
import pytest
from nbclient import NotebookClient

from helpers.compare import MODES
from helpers.runtime.backends import connect
from helpers.runtime.probes import PROBE_ORDER, probe

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK = NOTEBOOKS / "00_start_here.ipynb"
SOLUTIONS = NOTEBOOK.parent / "solutions"
# Settings that would choose another backend, model or dialect: the reader in this scenario has none of them.
FOREIGN_SETTINGS = ("WORKSHOP_BACKEND", "WORKSHOP_MODEL", "WORKSHOP_DIALECT", "WORKSHOP_IMAGES", "WORKSHOP_PORT",
                    "NVIDIA_API_KEY", "NVIDIA_BASE_URL", "HAI_API_KEY", "HAI_BASE_URL", "OPENAI_API_KEY",
                    "OPENAI_BASE_URL")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def llama_cpp_server(tmp_path_factory) -> str:
    from helpers.server.engine import model_path

    port = _free_port()
    log = tmp_path_factory.mktemp("llama_cpp_server") / "server.log"
    with log.open("w") as out:
        # One thread, as the embedded server decodes: spinning workers stall when another process holds a core.
        process = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()),
                                    "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192",
                                    "--n_threads", "1", "--verbose", "False"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer within 120 s:\n{log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def reader_environment(url: str) -> dict[str, str]:
    """This process's environment as a reader with only OPENAI_BASE_URL set would have it."""
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_SETTINGS}
    return {**env, "OPENAI_BASE_URL": url, "NO_PROXY": "127.0.0.1,localhost"}


def nim_reader_environment(url: str) -> dict[str, str]:
    """As a reader whose room runs its own NIM would have it: an NVIDIA key (here no real one) and NVIDIA_BASE_URL."""
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_SETTINGS}
    model = httpx.get(f"{url}/models", timeout=5, trust_env=False).json()["data"][0]["id"]
    return {**env, "NVIDIA_API_KEY": "nvapi-test-not-a-key", "NVIDIA_BASE_URL": url, "WORKSHOP_MODEL": model,
            "NO_PROXY": "127.0.0.1,localhost"}


@pytest.fixture
def as_reader(monkeypatch, tmp_path, llama_cpp_server):
    for name in FOREIGN_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", llama_cpp_server)
    monkeypatch.chdir(tmp_path)  # no .env file from the checkout
    return llama_cpp_server


def test_the_probe_finds_what_llama_cpp_python_speaks(as_reader):
    connection = connect()
    assert connection.profile.dialect == "json_object_schema"
    assert connection.profile.sees_images is False
    assert connection.profile.images_reason.startswith("probed: refused (HTTP 500: ")
    assert connection.profile.dialect_reason == ("probed in order: response_format rejected, structured_outputs "
                                                 "ignored, json_object_schema enforced")
    result = probe(connection, show=False)
    verdicts = {c.dialect: c.verdict for c in result.checks}
    assert verdicts == {"response_format": "rejected", "structured_outputs": "ignored",
                        "json_object_schema": "enforced", "guided_json": "ignored", "nvext": "ignored"}
    assert list(verdicts) == list(PROBE_ORDER)
    assert result.check("response_format").detail.startswith("HTTP 500: ")
    assert "json_object" in result.check("response_format").detail  # the server's own words
    assert "does not match the probe schema" in result.check("nvext").detail or \
           "not JSON" in result.check("nvext").detail


def test_notebook_00_runs_to_the_end(llama_cpp_server, tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # Run All leaves the exercises unanswered; then the reader loads the worked solutions and checks again,
    # the guided verdict check among them, on this server.
    checks = [cell.source for cell in notebook.cells if cell.cell_type == "code" and "check(*nb00." in cell.source]
    assert len(checks) == 2
    notebook.cells.append(nbformat.v4.new_code_cell(f"%run {SOLUTIONS / '00.py'}"))
    notebook.cells.extend(nbformat.v4.new_code_cell(source) for source in checks)
    # Raises CellExecutionError, with the cell and its error, if any cell fails.
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute(
        env=nim_reader_environment(llama_cpp_server))
    # What the reader sees: printed text, and the probe's table, displayed as Markdown.
    printed = "\n".join(out.get("text", "") + out.get("data", {}).get("text/markdown", "")
                        for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", []))
    assert "backend: nvidia" in printed and "dialect: json_object_schema" in printed
    assert "why:     probed in order: nvext ignored, response_format rejected" in printed
    assert "| json_object_schema | enforced |" in printed and "| response_format | rejected |" in printed
    # Going further's forced-tokens line and field list each say why there are none.
    assert "tokens the grammar forced: not reported" in printed
    assert "none (only the embedded server reports them)" in printed
    assert printed.count("❌ Not yet") == 2 and printed.count("✅ Solved") == 2


def test_a_two_trial_grid_measures_or_explains_every_mode(llama_cpp_server, tmp_path):
    run = subprocess.run([sys.executable, "-m", "helpers.compare", "--n", "2", "--out", str(tmp_path)],
                         env=reader_environment(llama_cpp_server), cwd=tmp_path, capture_output=True, text=True,
                         timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert (saved["backend"], saved["dialect"]) == ("openai", "json_object_schema")
    modes = {m["mode"]: m for m in saved["modes"]}
    assert list(modes) == list(MODES)
    for mode in modes.values():
        measured = not mode["skipped"] and not mode["failed"] and len(mode["trials"]) == 2
        assert measured or mode["skipped"] or mode["failed"], mode["mode"]
    assert len(modes["guided_backend"]["trials"]) == 2  # a plain guided row, in the dialect this server speaks
    assert modes["guided_response_format"]["skipped"] == "the openai backend does not speak response_format " \
                                                         "(probe: rejected)"
    assert modes["guided_nvext"]["skipped"] == "the openai backend does not speak nvext (probe: ignored)"
    assert "| guided_backend |" in run.stdout and (tmp_path / "charts.png").exists()


def test_the_pre_class_check_passes(llama_cpp_server, tmp_path):
    run = subprocess.run([sys.executable, "-m", "helpers.runtime.environment", "--check"],
                         env=reader_environment(llama_cpp_server), cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "guided round-trip in json_object_schema: enforced," in run.stdout


def errors_in(notebook) -> list[str]:
    """Every error a reader would see: an exception's output, or a traceback or warning written to stderr."""
    found = []
    for number, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.output_type == "error":
                found.append(f"cell {number}: {output.ename}: {output.evalue}")
            elif output.get("name") == "stderr" and ("Traceback" in output.text or "Warning" in output.text):
                found.append(f"cell {number}: {output.text[:300]}")
    return found


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("0[1-6]_*.ipynb")))
def test_every_other_notebook_runs_top_to_bottom_with_no_error_output(llama_cpp_server, name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    started = time.perf_counter()
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute(env=nim_reader_environment(llama_cpp_server))
    assert errors_in(notebook) == []
    # What the reader sees: printed text, and the probe's table, displayed as Markdown.
    printed = "\n".join(out.get("text", "") + out.get("data", {}).get("text/markdown", "")
                        for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", []))
    assert "backend: nvidia" in printed and "dialect: json_object_schema" in printed
    assert "images:  text only" in printed
    print(f"{name}: {time.perf_counter() - started:.0f} s on llama_cpp.server")
