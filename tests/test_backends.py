import pytest

from helpers import backends
from helpers.backends import PROFILES, choose_backend, connect, resolve_profile

SCHEMA = {"type": "object"}
ENV_NAMES = ["WORKSHOP_BACKEND", "WORKSHOP_MODEL", "WORKSHOP_DIALECT", "NVIDIA_API_KEY", "HAI_API_KEY",
             "OPENAI_BASE_URL", "OPENAI_API_KEY"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env file from the developer's checkout


def test_no_keys_means_the_embedded_model():
    assert choose_backend() == "embedded"


@pytest.mark.parametrize("name,value,backend", [
    ("NVIDIA_API_KEY", "nvapi-test", "nvidia"),
    ("HAI_API_KEY", "hai-test", "hcompany"),
    ("OPENAI_BASE_URL", "http://localhost:8000/v1", "openai"),
])
def test_a_key_in_the_environment_chooses_its_backend(monkeypatch, name, value, backend):
    monkeypatch.setenv(name, value)
    assert choose_backend() == backend


def test_workshop_backend_wins_over_keys(monkeypatch):
    monkeypatch.setenv("NVIDIA_API_KEY", "nvapi-test")
    monkeypatch.setenv("WORKSHOP_BACKEND", "embedded")
    assert choose_backend() == "embedded"


def test_unknown_backend_names_the_known_ones(monkeypatch):
    monkeypatch.setenv("WORKSHOP_BACKEND", "cloud")
    with pytest.raises(ValueError, match="nvidia"):
        choose_backend()


def test_a_dotenv_file_is_read(tmp_path):
    (tmp_path / ".env").write_text("HAI_API_KEY=hai-from-file\n")
    assert choose_backend() == "hcompany"


def test_each_backend_speaks_its_documented_dialect():
    assert PROFILES["nvidia"].guided(SCHEMA) == {"extra_body": {"nvext": {"guided_json": SCHEMA}}}
    assert PROFILES["hcompany"].guided(SCHEMA) == {"extra_body": {"structured_outputs": {"json": SCHEMA}}}
    assert PROFILES["openai"].guided(SCHEMA)["response_format"]["type"] == "json_schema"
    assert PROFILES["nvidia"].base_url == "https://integrate.api.nvidia.com/v1"
    assert PROFILES["hcompany"].base_url == "https://api.hcompany.ai/v1/"
    assert all(p.prompt_only() == {} for p in PROFILES.values())


def test_overrides_for_model_and_dialect(monkeypatch):
    monkeypatch.setenv("WORKSHOP_DIALECT", "guided_json")
    profile = resolve_profile("nvidia", model="nvidia/nemotron-nano-9b-v2")
    assert (profile.model, profile.dialect) == ("nvidia/nemotron-nano-9b-v2", "guided_json")
    assert profile.system_prompt("Answer in JSON.") == "/no_think\nAnswer in JSON."
    assert PROFILES["nvidia"].system_prompt("x") == "x"


def test_unknown_dialect_is_refused(monkeypatch):
    monkeypatch.setenv("WORKSHOP_DIALECT", "xml")
    with pytest.raises(ValueError, match="unknown dialect"):
        resolve_profile("embedded")


def test_openai_backend_needs_a_base_url():
    with pytest.raises(RuntimeError, match="OPENAI_BASE_URL"):
        resolve_profile("openai")


def test_connect_to_a_keyed_backend_keeps_the_key_out_of_every_printout(monkeypatch):
    secret = "nvapi-" + "k" * 40
    monkeypatch.setenv("NVIDIA_API_KEY", secret)
    connection = connect()
    assert connection.client.api_key == secret
    assert connection.client.base_url.host == "integrate.api.nvidia.com"
    assert secret not in repr(connection) and secret not in connection.describe()
    assert connection.profile.dialect == "nvext"


def test_missing_key_without_a_terminal_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("WORKSHOP_BACKEND", "hcompany")
    monkeypatch.setattr(backends.sys, "stdin", None)
    with pytest.raises(RuntimeError, match="HAI_API_KEY"):
        connect()


def test_self_hosted_server_without_a_key(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("WORKSHOP_MODEL", "meta-llama/Llama-3.1-8B-Instruct")
    connection = connect()
    assert (connection.model, connection.profile.dialect) == ("meta-llama/Llama-3.1-8B-Instruct", "response_format")
