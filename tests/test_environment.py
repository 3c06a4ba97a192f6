"""The setup cell's `prepare`: compile the embedded model only when it is the chosen backend and is missing."""
import subprocess

import pytest

import helpers.environment as environment


class Connection:
    """Stands in for `backends.Connection`: prepare only calls describe() on it."""

    def describe(self) -> str:
        return "backend: test"


@pytest.fixture
def pip_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, check: calls.append(args))
    monkeypatch.setattr(environment, "connect", Connection)
    return calls


def test_a_hosted_backend_installs_nothing(monkeypatch, pip_calls, capsys):
    monkeypatch.setattr(environment, "choose_backend", lambda: "nvidia")
    monkeypatch.setattr(environment, "missing_embedded_packages", lambda: ["llama-cpp-python"])
    assert isinstance(environment.prepare(), Connection)
    assert pip_calls == [] and capsys.readouterr().out == "backend: test\n"


def test_the_embedded_backend_installs_only_what_is_missing(monkeypatch, pip_calls, capsys):
    monkeypatch.setattr(environment, "choose_backend", lambda: "embedded")
    monkeypatch.setattr(environment, "missing_embedded_packages", lambda: ["llguidance"])
    environment.prepare(show=False)
    assert pip_calls == [[environment.sys.executable, "-m", "pip", "install", "--quiet", "llguidance"]]
    assert "Installing llguidance" in capsys.readouterr().out


def test_nothing_is_installed_when_everything_is_there(monkeypatch, pip_calls):
    monkeypatch.setattr(environment, "choose_backend", lambda: "embedded")
    monkeypatch.setattr(environment, "missing_embedded_packages", lambda: [])
    environment.prepare(show=False)
    assert pip_calls == []
