"""A setting the reader typed that cannot work is named, with where it was read and what to set, in one line; the
pre-class check that finds the guided cells unguided says what to set or unset."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import helpers.runtime.environment as environment
from helpers.runtime import paths
from helpers.runtime.backends import choose_backend, connect, resolve_profile
from helpers.runtime.probes import DialectCheck, ProbeResult
from helpers.runtime.profiles import DIALECT_SETTING, PROFILES, Connection
from helpers.runtime.settings import BackendError, SettingError

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["WORKSHOP_BACKEND", "WORKSHOP_MODEL", "WORKSHOP_DIALECT", "WORKSHOP_IMAGES", "NVIDIA_API_KEY", "HAI_API_KEY",
         "OPENAI_BASE_URL", "OPENAI_API_KEY", "WORKSHOP_PORT", "WORKSHOP_KEEP_SERVER"]


@pytest.fixture(autouse=True)
def checkout(monkeypatch, tmp_path):
    """A checkout root of its own, whose `.env` the test writes; nothing set in the environment."""
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    return tmp_path


def test_a_bad_url_in_the_dotenv_file_names_the_file_and_the_fix(checkout):
    (checkout / ".env").write_text("OPENAI_BASE_URL=localhost:8000/v1\n")
    with pytest.raises(SettingError) as refused:
        connect()
    message = str(refused.value)
    assert message.startswith(f"OPENAI_BASE_URL='localhost:8000/v1' (from {checkout / '.env'}) is not a URL")
    assert "http://HOST:PORT/v1" in message and "\n" not in message


def test_an_unreachable_url_says_where_it_was_set(checkout):
    (checkout / ".env").write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\n")
    with pytest.raises(BackendError, match=rf"\(OPENAI_BASE_URL, from {checkout / '.env'}\)"):
        connect()


def test_a_setting_in_the_environment_says_so(monkeypatch):
    monkeypatch.setenv("WORKSHOP_DIALECT", "xml")
    with pytest.raises(SettingError, match=r"WORKSHOP_DIALECT='xml' \(from the environment\): set it to one of "
                                           r".*response_format.*, or unset it"):
        resolve_profile("embedded")


@pytest.mark.parametrize("name,value,wanted", [("WORKSHOP_BACKEND", "cloud", "choose_backend"),
                                               ("WORKSHOP_IMAGES", "maybe", "resolve_profile")])
def test_each_bad_setting_is_a_setting_error_naming_its_file(checkout, name, value, wanted):
    (checkout / ".env").write_text(f"{name}={value}\n")
    call = choose_backend if wanted == "choose_backend" else lambda: resolve_profile("nvidia")
    with pytest.raises(SettingError, match=rf"{name}='{value}' \(from {checkout / '.env'}\)"):
        call()


def test_the_command_line_check_shows_one_line_no_traceback(checkout):
    (checkout / ".env").write_text("WORKSHOP_DIALECT=xml\n")
    script = (f"import helpers.runtime.paths as p, pathlib; p.ROOT = pathlib.Path({str(checkout)!r}); "
              "import sys; from helpers.runtime.environment import main; sys.exit(main(['--check']))")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: unknown dialect in WORKSHOP_DIALECT='xml'")
    assert len(result.stderr.splitlines()) == 1


def probe_result(backend: str, verdicts: dict[str, str]) -> ProbeResult:
    return ProbeResult(backend, "m", "http://x/v1", tuple(DialectCheck(d, v, "", 0.1) for d, v in verdicts.items()))


ALL_ENFORCED = {"response_format": "enforced", "structured_outputs": "enforced", "nvext": "enforced"}


@pytest.mark.parametrize("backend,active,verdicts,by_setting,fix", [
    ("embedded", "prompt_only", ALL_ENFORCED, True,
     "unset WORKSHOP_DIALECT (now prompt_only) or set it to response_format"),
    ("openai", "nvext", {"response_format": "ignored", "nvext": "ignored", "guided_json": "enforced"}, True,
     "unset WORKSHOP_DIALECT (now nvext) or set it to guided_json"),
    ("nvidia", "structured_outputs", {"structured_outputs": "ignored", "nvext": "ignored", "guided_json": "enforced"},
     True, "unset WORKSHOP_DIALECT (now structured_outputs) or set it to guided_json"),
    ("nvidia", "nvext", {"nvext": "ignored", "guided_json": "enforced"}, False, "set WORKSHOP_DIALECT=guided_json"),
    ("openai", "prompt_only", {"response_format": "ignored"}, False,
     "this server enforces no dialect: use another server or backend (docs/backends.md)"),
])
def test_the_fix_says_what_to_set_or_unset(backend, active, verdicts, by_setting, fix):
    assert probe_result(backend, verdicts).fix(active, by_setting) == fix


def test_not_ready_says_what_to_do(monkeypatch, capsys):
    profile = replace(PROFILES["embedded"], base_url="http://x/v1", dialect="prompt_only",
                      dialect_reason=DIALECT_SETTING)
    monkeypatch.setattr(environment, "prepare", lambda: Connection(None, "m", profile))
    monkeypatch.setattr(environment, "probe", lambda connection: probe_result("embedded", ALL_ENFORCED))
    assert environment.main(["--check"]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == ("NOT READY: the guided cells will not be guided here. Fix: unset WORKSHOP_DIALECT (now "
                    "prompt_only) or set it to response_format, then run this check again")


def test_the_probes_advice_names_the_setting_it_came_from():
    result = probe_result("embedded", {**ALL_ENFORCED, "guided_json": "ignored"})
    assert result.advice("guided_json", by_setting=True) == (
        "Warning: the active dialect, guided_json, was ignored: guided requests run unconstrained, like prompt-only. "
        "Fix: unset WORKSHOP_DIALECT (now guided_json) or set it to response_format, and restart the kernel.")


def test_the_servers_settings_are_read_from_the_dotenv_file_too(checkout):
    """Instant. docs/backends.md says settings come from the environment, then `.env`: WORKSHOP_PORT and
    WORKSHOP_KEEP_SERVER were read from the environment alone, and a `.env` that set them was silently ignored."""
    from helpers.runtime.embedded import ServerError, keep_server, requested_port

    (checkout / ".env").write_text("WORKSHOP_PORT=8123\nWORKSHOP_KEEP_SERVER=1\n")
    assert requested_port() == 8123 and keep_server()
    (checkout / ".env").write_text("WORKSHOP_PORT=eighty\n")
    with pytest.raises(ServerError, match=rf"WORKSHOP_PORT='eighty' \(from {checkout / '.env'}\) is not a port"):
        requested_port()
