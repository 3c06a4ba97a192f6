"""The setup cell's `prepare`: install the embedded model only when it is the chosen backend and is missing."""
import pytest

import helpers.runtime.environment as environment


class Connection:
    """Stands in for `profiles.Connection`: prepare only calls describe() on it."""

    def describe(self) -> str:
        return "backend: test"


@pytest.fixture
def installs(monkeypatch):
    calls = []
    monkeypatch.setattr(environment, "install_embedded", calls.append)
    monkeypatch.setattr(environment, "connect", Connection)
    return calls


def test_a_hosted_backend_installs_nothing(monkeypatch, installs, capsys):
    monkeypatch.setattr(environment, "choose_backend", lambda: "nvidia")
    monkeypatch.setattr(environment, "missing_embedded_packages", lambda: ["llama-cpp-python"])
    assert isinstance(environment.prepare(), Connection)
    assert installs == [] and capsys.readouterr().out == "backend: test\n"


def test_the_embedded_backend_installs_only_what_is_missing(monkeypatch, installs, capsys):
    monkeypatch.setattr(environment, "choose_backend", lambda: "embedded")
    monkeypatch.setattr(environment, "missing_embedded_packages", lambda: ["llguidance"])
    monkeypatch.delitem(environment.sys.modules, "google.colab", raising=False)
    environment.prepare(show=False)
    assert installs == [["llguidance"]] and "Colab" not in capsys.readouterr().out


def test_a_new_colab_runtime_says_why_it_installs_and_what_a_class_can_do_instead(monkeypatch, installs, capsys):
    monkeypatch.setattr(environment, "choose_backend", lambda: "embedded")
    monkeypatch.setattr(environment, "missing_embedded_packages", lambda: ["llama-cpp-python"])
    monkeypatch.setitem(environment.sys.modules, "google.colab", object())
    environment.prepare(show=False)
    out = capsys.readouterr().out
    assert "every badge opens one" in out and "NVIDIA API Catalog key" in out and installs == [["llama-cpp-python"]]


def test_nothing_is_installed_when_everything_is_there(monkeypatch, installs):
    monkeypatch.setattr(environment, "choose_backend", lambda: "embedded")
    monkeypatch.setattr(environment, "missing_embedded_packages", lambda: [])
    environment.prepare(show=False)
    assert installs == []


# --- the pre-class check: the dialect probe of helpers.runtime.probes, plus a verdict --------------------------------

@pytest.fixture
def openai_env(monkeypatch, tmp_path):
    for name in ("WORKSHOP_BACKEND", "WORKSHOP_MODEL", "WORKSHOP_DIALECT", "NVIDIA_API_KEY", "HAI_API_KEY",
                 "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env file from the developer's checkout
    return monkeypatch


def test_the_check_fails_where_nothing_is_enforced(openai_env, capsys):
    from fake_openai_server import FakeServer

    with FakeServer() as fake:
        openai_env.setenv("OPENAI_BASE_URL", fake.base_url)
        assert environment.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "backend: openai" in out and "dialect: prompt_only" in out and "| nvext | ignored |" in out
    assert "guided round-trip: none, the active dialect is prompt_only" in out and "NOT READY" in out


def test_the_check_reports_an_unreachable_server(openai_env, capsys):
    openai_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert environment.main(["--check"]) == 2
    assert "cannot reach the openai backend" in capsys.readouterr().err


@pytest.fixture
def embedded_env(openai_env, tmp_path):
    """The embedded backend, with a temporary folder of its own for the server's folder."""
    import tempfile

    openai_env.setenv("WORKSHOP_BACKEND", "embedded")
    openai_env.setattr(tempfile, "tempdir", str(tmp_path))
    openai_env.setenv("TMPDIR", str(tmp_path))
    return openai_env


def test_a_workshop_port_that_is_not_a_port_is_one_line_not_a_traceback(embedded_env, capsys):
    embedded_env.setenv("WORKSHOP_PORT", "abc")
    assert environment.main(["--check"]) == 2
    error = capsys.readouterr().err
    assert error == ("error: WORKSHOP_PORT='abc' (from the environment) is not a port: unset it to let the server take any free port, or set "
                     "it to the number of a free one\n")


def test_a_workshop_port_another_program_holds_is_one_line_with_the_way_out(embedded_env, capsys):
    import socket

    with socket.socket() as other:  # python3 -m http.server, or anything else listening there
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        embedded_env.setenv("WORKSHOP_PORT", str(port))
        assert environment.main(["--check"]) == 2
    error = capsys.readouterr().err
    assert error == (f"error: port {port} is held by another program: unset WORKSHOP_PORT to let "
                     "the server take any free port, or set it to a free one\n")


@pytest.mark.integration
def test_the_check_passes_on_the_embedded_model(server_url, capsys):
    assert environment.check()
    out = capsys.readouterr().out
    assert "backend: embedded" in out and "The active dialect, response_format, is enforced." in out
    assert "guided round-trip in response_format: enforced," in out and "ready: the guided cells" in out


@pytest.mark.integration
def test_the_check_returns_once_the_server_it_started_has_exited(tmp_path):
    """About 15 s: a model load and the probe. Before, the check returned while its server still ran (listed by
    `./workshop status`), and the server left about 3 s later, when it saw its owner gone."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TMPDIR": str(tmp_path), "WORKSHOP_BACKEND": "embedded"}  # a server folder of its own
    env.pop("WORKSHOP_PORT", None)
    done = subprocess.run([sys.executable, "-m", "helpers.runtime.environment", "--check"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    status = subprocess.run([sys.executable, "-m", "helpers.runtime.embedded", "status"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert status.stdout.strip() == "no embedded server of yours is running", status.stdout
