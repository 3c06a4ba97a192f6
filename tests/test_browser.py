"""What a learner sees: JupyterLab from this checkout, in headless Chromium, running notebook 00 and notebook 05's
core up to the mask explorer, as a learner would (Shift+Enter, cell after cell).

Checks what no kernel-side test can: the outputs render in the page (text, a chart as a picture, the mask's
coloured tokens), no cell shows an error, and the mask explorer's slider, moved in the browser, makes the kernel
redraw the token it points at. Nothing is downloaded: Debian's `chromium` and `chromium-driver`, and `selenium`
with the driver's path given, so its driver manager never runs. JupyterLab serves copies of the two notebooks from a
temporary folder, with autosave off, so the checkout's notebooks stay as committed.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL = "sudo apt-get install chromium chromium-driver"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
WIDGET_NOTEBOOK = "05_prompt_only_vs_guided.ipynb"
GRAMMAR_RED, MODEL_BLUE = "rgb(248, 201, 196)", "rgb(198, 221, 245)"  # helpers.mask_view.COLOURS, as CSS reads them

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not (CHROMIUM and DRIVER), reason=f"no Chromium or its driver here: {INSTALL}")]
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in requirements-test.txt: ./workshop test installs it")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cells_up_to(notebook: str, marker: str | None) -> int:
    """How many cells a learner runs: all of them, or up to and including the first code cell holding `marker`."""
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    if marker is None:
        return len(cells)
    return next(i for i, c in enumerate(cells) if c["cell_type"] == "code" and marker in "".join(c["source"])) + 1


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a free port of 127.0.0.1, with a token, serving copies of notebooks 00 and 05."""
    home = tmp_path_factory.mktemp("lab")
    (home / "notebooks").mkdir()
    for name in ("00_start_here.ipynb", WIDGET_NOTEBOOK):
        shutil.copy(ROOT / "notebooks" / name, home / "notebooks" / name)
    settings = home / "settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    # Every cell in the page, not only those scrolled into view: the test reads them all.
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime")}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--ServerApp.port={port}",
               "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={home}", f"--LabApp.user_settings_dir={home / 'settings'}",
               f"--LabApp.workspaces_dir={home / 'workspaces'}",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
               "--KernelManager.transport=ipc",  # as ./workshop lab starts its kernels
               *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])]  # CI's containers
    log = (home / "lab.log").open("w")
    process = subprocess.Popen(command, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=1)
                break
            except OSError:
                if process.poll() is not None:
                    pytest.fail(f"JupyterLab exited: {(home / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield url, token
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                     "--disable-gpu", "--no-first-run"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def open_and_run(browser, lab, notebook: str, cells: int, timeout: float = 150) -> None:
    """Open the notebook in JupyterLab and press Shift+Enter on its first `cells` cells; wait until the kernel is
    idle and every run cell has its execution count."""
    url, token = lab
    browser.get(f"{url}/lab/tree/notebooks/{notebook}?reset&token={token}")
    wait = WebDriverWait(browser, 90)
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"))
    wait.until(lambda b: kernel_state(lab, notebook) == "idle")
    first = browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")[0]
    first.find_element(By.CSS_SELECTOR, ".jp-InputPrompt").click()
    actions = webdriver.ActionChains(browser)
    actions.send_keys(Keys.ESCAPE)
    for _ in range(cells):
        actions.key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT)
    actions.perform()

    def done(b) -> bool:
        # A cell whose source is hidden (the setup cell) shows a placeholder prompt with no count: only shown
        # inputs' prompts are read, and the kernel being idle covers the hidden ones.
        prompts = [p.text for p in b.find_elements(By.CSS_SELECTOR, ".jp-CodeCell .jp-InputArea-prompt")]
        ran = prompts[:code_cells(notebook, cells)]
        return bool(ran) and all(p.strip("[]: ") not in ("", "*") for p in ran) \
            and kernel_state(lab, notebook) == "idle"

    WebDriverWait(browser, timeout, poll_frequency=1).until(done)


def kernel_state(lab, notebook: str) -> str | None:
    """The execution state of the notebook's kernel, from the server's sessions; None before it has one."""
    url, token = lab
    with urllib.request.urlopen(f"{url}/api/sessions?token={token}", timeout=5) as answer:
        sessions = json.load(answer)
    return next((s["kernel"]["execution_state"] for s in sessions if s["path"].endswith(notebook)), None)


def code_cells(notebook: str, cells: int) -> int:
    """How many of the first `cells` cells are code cells whose source the page shows."""
    source = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"][:cells]
    return sum(c["cell_type"] == "code" and not c["metadata"].get("jupyter", {}).get("source_hidden") for c in source)


def outputs_text(browser) -> str:
    return "\n".join(o.text for o in browser.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output"))


def no_errors(browser) -> None:
    errors = browser.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    tracebacks = [e.text for e in errors if "Traceback" in e.text or "Error" in e.text.split("\n")[0]]
    assert not tracebacks and "Traceback (most recent call last)" not in outputs_text(browser)


def test_notebook_00_runs_and_its_outputs_render(browser, lab):
    open_and_run(browser, lab, "00_start_here.ipynb", cells_up_to("00_start_here.ipynb", None))
    text = outputs_text(browser)
    assert "backend: embedded" in text and "finish_reason: stop" in text
    assert "'city':" in text  # the guided reply, parsed
    assert "enforced" in text  # the dialect probe's verdicts
    no_errors(browser)


def test_notebook_05_shows_its_chart_the_coloured_trace_and_a_slider_the_kernel_answers(browser, lab):
    open_and_run(browser, lab, WIDGET_NOTEBOOK, cells_up_to(WIDGET_NOTEBOOK, "mask_explorer(trace)"))
    no_errors(browser)
    pictures = browser.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output img")
    assert any(browser.execute_script("return arguments[0].naturalWidth", p) > 100 for p in pictures)
    backgrounds = browser.execute_script(
        "return [...document.querySelectorAll('.jp-OutputArea-output span')].map(s => getComputedStyle(s).backgroundColor)")
    assert GRAMMAR_RED in backgrounds and MODEL_BLUE in backgrounds, "the mask's coloured tokens did not render"

    readout = WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, ".widget-html-content"))
    pane = next(p for p in readout if "token 1 of" in p.text)
    handle = browser.find_element(By.CSS_SELECTOR, ".widget-slider .noUi-handle")
    handle.click()
    webdriver.ActionChains(browser).send_keys(Keys.ARROW_RIGHT).send_keys(Keys.ARROW_RIGHT).perform()
    WebDriverWait(browser, 30).until(lambda b: "token 3 of" in pane.text)
