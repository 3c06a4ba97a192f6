import importlib
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import nbformat
import openai
import pytest
from fake_openai_server import FakeServer
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from helpers.runtime import backends, client, paths, probes, profiles
from helpers.runtime.backends import choose_backend, connect, resolve_profile
from helpers.runtime.client import dialect_sent
from helpers.runtime.dialects import DIALECTS, guided_json
from helpers.runtime.probes import PROBE_ORDER, DialectCheck, ProbeResult, probe, probe_model
from helpers.runtime.profiles import PROFILES
from helpers.runtime.settings import BackendError, SettingError

SCHEMA = {"type": "object"}
ENV_NAMES = ["WORKSHOP_BACKEND", "WORKSHOP_MODEL", "WORKSHOP_DIALECT", "NVIDIA_API_KEY", "HAI_API_KEY",
             "OPENAI_BASE_URL", "OPENAI_API_KEY"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(paths, "ROOT", tmp_path)  # no stray .env file from the developer's checkout


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


def test_a_dotenv_file_is_read_from_the_checkouts_root_only(monkeypatch, tmp_path):
    """A `.env` planted in a folder above the checkout (a shared /tmp) or in the working folder is not read."""
    checkout = tmp_path / "checkout"
    (checkout / "notebooks").mkdir(parents=True)
    monkeypatch.setattr(paths, "ROOT", checkout)
    (tmp_path / ".env").write_text("OPENAI_BASE_URL=http://planted.example/v1\n")
    monkeypatch.chdir(checkout / "notebooks")
    (checkout / "notebooks" / ".env").write_text("OPENAI_BASE_URL=http://planted.example/v1\n")
    assert choose_backend() == "embedded"


def test_each_backend_speaks_its_documented_dialect():
    assert PROFILES["nvidia"].guided(SCHEMA) == {"extra_body": {"nvext": {"guided_json": SCHEMA}}}
    assert PROFILES["hcompany"].guided(SCHEMA) == {"extra_body": {"structured_outputs": {"json": SCHEMA}}}
    assert PROFILES["openai"].dialect_reason == profiles.NOT_PROBED  # connect() asks the server
    assert PROFILES["nvidia"].base_url == "https://integrate.api.nvidia.com/v1"
    assert PROFILES["hcompany"].base_url == "https://api.hcompany.ai/v1/"
    assert all(p.prompt_only() == {} for p in PROFILES.values())


def test_overrides_for_model_and_dialect(monkeypatch):
    monkeypatch.setenv("WORKSHOP_DIALECT", "guided_json")
    profile = resolve_profile("nvidia", model="nvidia/nemotron-nano-9b-v2")
    assert (profile.model, profile.dialect) == ("nvidia/nemotron-nano-9b-v2", "guided_json")
    assert profile.system_prompt("Answer in JSON.") == "/no_think\n\nAnswer in JSON."
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
    assert resolve_profile().base_url == "https://integrate.api.nvidia.com/v1"
    with FakeServer(enforce={"nvext"}) as fake:  # a NIM of one's own, at NVIDIA_BASE_URL
        monkeypatch.setenv("NVIDIA_BASE_URL", fake.base_url)
        connection = connect()
    assert connection.client.api_key == secret and str(connection.client.base_url).rstrip("/") == fake.base_url
    assert secret not in repr(connection) and secret not in connection.describe()
    assert connection.profile.dialect == "nvext" and connection.profile.dialect_reason == "probed in order: nvext enforced"
    assert [dialect_sent(json.dumps(body)) for body in fake.bodies] == ["nvext"]  # the documented one, enforced: done


@pytest.mark.parametrize("server,picked,asked", [
    ({"enforce": {"structured_outputs"}}, "structured_outputs", ["nvext", "response_format", "structured_outputs"]),
    ({"enforce": {"structured_outputs"}, "refuse": lambda body, headers: (400, {"error": {"message": "no nvext"}})
      if "nvext" in body else None}, "structured_outputs", ["nvext", "response_format", "structured_outputs"]),
    ({}, "prompt_only", ["nvext", "response_format", "structured_outputs", "json_object_schema", "guided_json"]),
], ids=["ignores-nvext", "refuses-nvext", "enforces-nothing"])
def test_a_nim_that_ignores_or_refuses_nvext_is_never_trusted_with_it(monkeypatch, server, picked, asked):
    """Instant: a fake server. Issue 49: the nvidia backend sent nvext unprobed; a server that ignored it let the
    notebooks' guided cells run unguided, and one that refused it failed them."""
    monkeypatch.setenv("NVIDIA_API_KEY", "nvapi-test")
    with FakeServer(**server) as fake:
        monkeypatch.setenv("NVIDIA_BASE_URL", fake.base_url)
        connection = connect()
    assert connection.profile.dialect == picked
    assert [dialect_sent(json.dumps(body)) for body in fake.bodies] == asked
    if picked == "prompt_only":
        assert "this server enforces no guided JSON" in connection.describe()
        assert "the ladder's fallback stands in" in connection.profile.dialect_reason


def test_a_base_url_that_is_not_a_url_is_named_where_it_was_set(monkeypatch):
    monkeypatch.setenv("NVIDIA_API_KEY", "nvapi-test")
    monkeypatch.setenv("NVIDIA_BASE_URL", "localhost:8000/v1")
    with pytest.raises(SettingError, match=r"NVIDIA_BASE_URL='localhost:8000/v1' \(from the environment\) is not a URL"):
        resolve_profile()


def test_missing_key_without_a_terminal_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("WORKSHOP_BACKEND", "hcompany")
    monkeypatch.setattr(backends.sys, "stdin", None)
    with pytest.raises(RuntimeError, match="HAI_API_KEY"):
        connect()


def test_an_explicit_dialect_is_probed_alone_kept_and_said_to_be_unenforced(monkeypatch):
    with FakeServer() as fake:  # it enforces nothing
        openai_backend(monkeypatch, fake, WORKSHOP_MODEL="meta-llama/Llama-3.1-8B-Instruct",
                       WORKSHOP_DIALECT="guided_json", WORKSHOP_IMAGES="no")
        connection = connect()
    assert (connection.model, connection.profile.dialect) == ("meta-llama/Llama-3.1-8B-Instruct", "guided_json")
    assert connection.profile.dialect_reason == "set by WORKSHOP_DIALECT"
    assert [dialect_sent(json.dumps(body)) for body in fake.bodies] == ["guided_json"]  # that one, and only that one
    assert "guided:  NOT ENFORCED: this server ignored the guided_json dialect you set" in connection.describe()
    assert (connection.profile.sees_images, connection.profile.images_reason) == (False, "set by WORKSHOP_IMAGES")
    assert connection.client.api_key == "not-needed"


def test_each_documented_backend_says_whether_its_model_sees_images():
    assert {name: profile.sees_images for name, profile in PROFILES.items() if name != "openai"} == {
        "embedded": False, "nvidia": False, "hcompany": True}
    assert PROFILES["openai"].images_reason == profiles.IMAGES_NOT_PROBED  # found out by connect()


def has_image(body: dict) -> bool:
    return any(isinstance(m["content"], list) and any(p["type"] == "image_url" for p in m["content"])
               for m in body["messages"])


def test_a_server_that_refuses_images_is_text_only_and_says_why(monkeypatch):
    refuse = lambda body, headers: (500, {"detail": "can only concatenate str (not \"list\") to str"}) \
        if has_image(body) else None  # noqa: E731
    with FakeServer(refuse) as fake:
        openai_backend(monkeypatch, fake, WORKSHOP_DIALECT="json_object_schema")
        connection = connect()
    assert [has_image(body) for body in fake.bodies] == [False, True]  # the dialect's probe, then one image
    assert connection.profile.sees_images is False
    assert connection.profile.images_reason.startswith("probed: refused (HTTP 500: can only concatenate")
    assert "images:  text only - probed: refused" in connection.describe()


def test_a_server_that_answers_as_if_the_image_were_not_there_is_text_only(monkeypatch):
    with FakeServer() as fake:  # it answers the same text whatever it is sent
        openai_backend(monkeypatch, fake, WORKSHOP_DIALECT="json_object_schema")
        connection = connect()
    assert connection.profile.sees_images is False
    assert connection.profile.images_reason.startswith("probed: ignored (asked for ")
    assert "as if the image were not there" in connection.profile.images_reason


class SeeingModel:
    """A stand-in client whose model reads the probe's image: it names the colours of the two halves."""

    def __init__(self):
        self.chat = self.completions = self
        self.requests = []

    def with_options(self, **options):
        return self

    def create(self, **request):
        import base64
        import io

        from PIL import Image

        self.requests.append(request)
        url = next(p["image_url"]["url"] for m in request["messages"] for p in m["content"] if p["type"] == "image_url")
        image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")
        names = {rgb: name for name, rgb in probes.COLOURS.items()}
        said = f"{names[image.getpixel((0, 0))].title()} and {names[image.getpixel((15, 0))]}."
        message = SimpleNamespace(content=said)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


def test_a_model_that_names_both_colours_sees_images_and_one_that_names_one_does_not():
    model = SeeingModel()
    connection = profiles.Connection(model, "vision", PROFILES["openai"])
    assert probes.probe_images(connection).verdict == "sees"
    assert model.requests[0]["max_tokens"] == probes.IMAGE_PROBE_TOKENS
    half_blind = profiles.Connection(model, "vision", PROFILES["openai"])
    model.create = lambda **request: SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(
        content="Red."))])
    assert probes.probe_images(half_blind).verdict == "ignored"  # one colour is not both, whichever it names


def test_workshop_images_overrides_the_profile_and_is_checked(monkeypatch):
    monkeypatch.setenv("WORKSHOP_IMAGES", "yes")
    assert backends.resolve_profile("nvidia").sees_images is True
    monkeypatch.setenv("WORKSHOP_IMAGES", "maybe")
    with pytest.raises(ValueError, match="WORKSHOP_IMAGES"):
        backends.resolve_profile("nvidia")


def test_a_documented_backend_keeps_its_dialect_when_it_is_enforced_at_the_cost_of_one_request(monkeypatch):
    monkeypatch.setenv("HAI_API_KEY", "hai-test")
    with FakeServer(enforce={"structured_outputs", "response_format"}) as fake:
        monkeypatch.setenv("HAI_BASE_URL", fake.base_url)
        connection = connect()
    assert connection.profile.dialect == "structured_outputs" and len(fake.bodies) == 1
    assert "probed in order: structured_outputs enforced" in connection.describe()


def test_an_unreachable_server_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(BackendError, match="cannot reach the openai backend at http://127.0.0.1:9/v1"):
        connect()
    monkeypatch.setenv("WORKSHOP_MODEL", "m")  # the model is known, so the probe is the first request
    with pytest.raises(BackendError, match="is the server running"):
        connect()


# --- the probe ----------------------------------------------------------------------------------------------

def test_the_probe_covers_every_dialect_once():
    assert sorted(PROBE_ORDER) == sorted(set(DIALECTS) - {"prompt_only"})


def test_the_probe_schema_uses_the_keywords_the_workshop_relies_on():
    model = probe_model("probe-abc123")
    text = json.dumps(model.model_json_schema())
    for keyword in ('"$ref"', '"anyOf"', '"enum"', '"maxLength"', '"additionalProperties": false',
                    '"const": "probe-abc123"'):
        assert keyword in text
    assert probes._mismatch(model, '{"token": "probe-abc123", "answer": "yes", "detail": {"word": "blue"}}') is None
    assert probes._mismatch(model, '{"token": "probe-abc123", "answer": "yes", "detail": null}') is None
    assert "not JSON" in probes._mismatch(model, "The sky is blue.")
    # "any JSON" is not enough: the token, the enum, the length bound and the closed object all count.
    for wrong, where in [('{"answer": "yes"}', "token: missing"),
                         ('{"token": "probe-abc124", "answer": "yes", "detail": null}', "token: literal_error"),
                         ('{"token": "probe-abc123", "answer": "maybe", "detail": null}', "answer: literal_error"),
                         ('{"token": "probe-abc123", "answer": "no", "detail": {"word": "extraordinarily"}}',
                          "detail.word: string_too_long"),
                         ('{"token": "probe-abc123", "answer": "no", "detail": null, "x": 1}', "x: extra_forbidden")]:
        assert where in probes._mismatch(model, wrong)


def openai_backend(monkeypatch, fake: FakeServer, **settings: str) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)


def test_a_server_that_accepts_every_field_and_enforces_nothing_is_ignored_never_guided(monkeypatch):
    with FakeServer() as fake:
        openai_backend(monkeypatch, fake)
        connection = connect()
        assert connection.model == "fake-model"
        assert (connection.profile.dialect, connection.profile.dialects_spoken) == ("prompt_only", {"prompt_only"})
        assert connection.profile.dialect_reason.startswith("probed: this server enforces no guided JSON")
        result = probe(connection, show=False)
    assert [c.dialect for c in result.checks] == list(PROBE_ORDER)
    assert {c.verdict for c in result.checks} == {"ignored"} and result.enforced == []
    assert all("does not match the probe schema (token: missing" in c.detail for c in result.checks)
    # One request per dialect, each spelled as that dialect spells it, then nothing more: the result is cached.
    assert [dialect_sent(json.dumps(body)) for body in fake.bodies] == [*PROBE_ORDER, None]  # then the image probe
    assert "prompt-only behaviour" in result.advice("prompt_only")


def test_the_probe_is_cached_per_server_and_model_and_can_be_refreshed(monkeypatch):
    with FakeServer() as fake:
        openai_backend(monkeypatch, fake, WORKSHOP_DIALECT="nvext", WORKSHOP_IMAGES="no")
        connection = connect()  # probes nvext, the dialect set, alone
        first = probe(connection, show=False)  # the other four, asked once each
        assert probe(connection, show=False).checks == first.checks and len(fake.bodies) == len(PROBE_ORDER)
        probe(connection, show=False, refresh=True)
        assert len(fake.bodies) == 2 * len(PROBE_ORDER)


def refuse_json_schema(body: dict, headers):
    """What llama-cpp-python's server answers to response_format json_schema (its own words, seen in a run)."""
    if (body.get("response_format") or {}).get("type") == "json_schema":
        return 500, {"error": {"message": "Input should be 'text' or 'json_object'", "type": "internal_server_error"}}
    return None


def test_a_refused_dialect_is_rejected_with_the_servers_words(monkeypatch, capsys):
    with FakeServer(refuse_json_schema) as fake:
        openai_backend(monkeypatch, fake, WORKSHOP_DIALECT="response_format")
        result = probe(connect())
    assert result.check("response_format") == DialectCheck(
        "response_format", "rejected", "HTTP 500: Input should be 'text' or 'json_object'",
        result.check("response_format").seconds)
    printed = capsys.readouterr().out
    assert "| response_format | rejected | HTTP 500: Input should be 'text' or 'json_object' |" in printed
    assert "Warning: the active dialect, response_format, was rejected: guided requests fail" in printed


def test_a_long_server_message_is_cut_to_one_short_line(monkeypatch):
    def refuse_with_a_traceback(body, headers):  # llama-cpp-python appends its own traceback to the message
        return 500, {"error": {"message": "Input should be 'text'\n" + "  File \"app.py\", line 1\n" * 40}}

    with FakeServer(refuse_with_a_traceback) as fake:
        openai_backend(monkeypatch, fake, WORKSHOP_DIALECT="nvext")
        detail = probe(connect(), show=False).check("nvext").detail
    assert detail.startswith("HTTP 500: Input should be 'text' File \"app.py\", line 1 File")
    assert detail.endswith("...") and "\n" not in detail and len(detail) == len("HTTP 500: ") + 200 + 3


def test_the_dialect_pick_is_the_first_enforced_in_order_and_says_why():
    checks = tuple(DialectCheck(d, v, "", 0.1) for d, v in [
        ("response_format", "rejected"), ("structured_outputs", "ignored"), ("json_object_schema", "enforced"),
        ("guided_json", "ignored"), ("nvext", "enforced")])
    result = ProbeResult("openai", "m", "http://x/v1", checks)
    profile = backends._probed_profile(replace_profile(), result)
    assert profile.dialect == "json_object_schema"
    assert profile.dialects_spoken == {"json_object_schema", "nvext", "prompt_only"}
    assert profile.dialect_reason == ("probed in order: response_format rejected, structured_outputs ignored, "
                                      "json_object_schema enforced")
    assert result.advice("json_object_schema") == "The active dialect, json_object_schema, is enforced."
    assert result.advice("structured_outputs") == (
        "Warning: the active dialect, structured_outputs, was ignored: guided requests run unconstrained, like "
        "prompt-only. Fix: set WORKSHOP_DIALECT=json_object_schema, and restart the kernel.")


def replace_profile():
    return replace(PROFILES["openai"], base_url="http://x/v1", model="m")


# --- errors that say what to do -----------------------------------------------------------------------------

def test_a_refused_guided_request_says_backend_dialect_server_words_and_fix(monkeypatch):
    with FakeServer(refuse_json_schema) as fake:
        openai_backend(monkeypatch, fake, WORKSHOP_DIALECT="response_format", WORKSHOP_MODEL="fake-model")
        connection = connect()
        ask = dict(model=connection.model, messages=[{"role": "user", "content": "hi"}], max_tokens=5)
        with pytest.raises(openai.InternalServerError) as refused:
            connection.client.chat.completions.create(**ask, **connection.profile.guided({"type": "object"}))
        error = refused.value
        # The openai client's own error for the status, so code that catches it (or openai.APIStatusError) still does.
        assert type(error) is openai.InternalServerError and error.type == "internal_server_error"
        assert error.response.headers["x-should-retry"] == "false"  # the server's headers: retried as it says
        headline, fix = error.body["message"].splitlines()
        assert headline == ("the openai backend refused a guided request in the response_format dialect: "
                            "Input should be 'text' or 'json_object'")
        assert "python -m helpers.runtime.backends --probe" in fix and "WORKSHOP_DIALECT" in fix
        assert str(error) == f"Error code: 500 - {headline}\n{fix}"  # what a notebook shows, last
        # Once the server has been probed, the fix names the dialect to set; a copy with other options explains too.
        probe(connection, show=False)
        with pytest.raises(openai.InternalServerError, match="fix: this server enforces no dialect"):
            connection.client.with_options(max_retries=0).chat.completions.create(
                **ask, **connection.profile.guided({"type": "object"}))
        # An unguided request's error is the client's own: nothing to explain about dialects.
        with pytest.raises(openai.InternalServerError) as plain:
            connection.client.chat.completions.create(**ask, response_format={"type": "json_schema",
                                                                               "json_schema": {"name": "x"}})
        assert plain.value.body == {"message": "Input should be 'text' or 'json_object'",
                                    "type": "internal_server_error"}


def test_the_key_never_appears_in_an_explained_error(monkeypatch):
    secret = "sk-" + "s" * 40

    def echo_the_key(body, headers):  # a careless server that repeats the Authorization header, late in a long text
        return 400, {"error": {"message": "x" * 150 + f" bad request from {headers.get('Authorization')}"}}

    with FakeServer(echo_the_key) as fake:
        openai_backend(monkeypatch, fake, WORKSHOP_DIALECT="nvext", WORKSHOP_MODEL="fake-model",
                       OPENAI_API_KEY=secret)
        connection = connect()
        with pytest.raises(openai.BadRequestError, match="refused a guided request in the nvext dialect") as refused:
            connection.client.chat.completions.create(model=connection.model, messages=[], max_tokens=5,
                                                      **guided_json("nvext", {"type": "object"}))
    # Blanked before the long message is cut, so not even the key's first characters survive the cut.
    assert "sk-" not in str(refused.value) and "bad request from Bearer [key]" in str(refused.value)
    assert "sk-" not in refused.value.response.text


def test_the_key_never_appears_when_the_model_listing_is_refused(monkeypatch):
    secret = "sk-" + "m" * 40

    def echo_the_key(headers):  # a careless server that repeats the Authorization header in its error
        return 401, {"error": {"message": f"no model for {headers.get('Authorization')}"}}

    with FakeServer(refuse_models=echo_the_key) as fake:
        openai_backend(monkeypatch, fake, OPENAI_API_KEY=secret)
        with pytest.raises(BackendError, match="when asked for its models") as refused:
            connect()
    assert "sk-" not in str(refused.value) and "no model for Bearer [key]" in str(refused.value)


def test_the_command_line_probe(monkeypatch, capsys):
    with FakeServer() as fake:
        openai_backend(monkeypatch, fake, WORKSHOP_DIALECT="guided_json")
        assert backends.main(["--probe"]) == 1  # the active dialect is not enforced there
    out = capsys.readouterr().out
    assert "backend: openai" in out and "| guided_json | ignored |" in out
    assert "Warning: the active dialect, guided_json, was ignored" in out
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert backends.main([]) == 2 and "cannot reach" in capsys.readouterr().err


@pytest.mark.integration
def test_the_embedded_server_enforces_every_dialect(server_url):
    result = probe(connect(), show=False)
    assert result.enforced == list(PROBE_ORDER), result.table()


def test_in_a_notebook_a_refused_guided_request_ends_in_its_explanation(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os\n"
        "from fake_openai_server import FakeServer\n"
        "from test_backends import refuse_json_schema\n"
        "os.environ['OPENAI_BASE_URL'] = FakeServer(refuse_json_schema).__enter__().base_url\n"
        "from helpers.runtime.backends import connect\n"
        "conn = connect()\n"
        "conn.client.chat.completions.create(model=conn.model, messages=[{'role': 'user', 'content': 'hi'}],\n"
        "                                    **conn.profile.guided({'type': 'object'}))")])
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env.update(WORKSHOP_DIALECT="response_format", PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    with pytest.raises(CellExecutionError):
        NotebookClient(notebook, timeout=60, kernel_name="python3").execute(cwd=str(tmp_path), env=env)
    [error] = [out for out in notebook.cells[0].outputs if out.output_type == "error"]
    # IPython ends the traceback with the error's name and value: the openai client's own error, explained.
    assert error.ename == "InternalServerError"
    assert error.evalue == ("Error code: 500 - the openai backend refused a guided request in the response_format "
                            "dialect: Input should be 'text' or 'json_object'\n"
                            + client._fix("response_format", None))


# --- a rate limit, waited out where the room sees it -----------------------------------------------------------------

def limited_then_answering(limits: list[dict[str, str]]):
    """A transport whose server answers 429 with each of `limits`' headers in turn, then a chat completion."""
    # the httpx the openai client is built on (`httpx2` since openai 3), as the client module says
    httpx = importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])

    answered = []

    def handle(request):
        answered.append(request.url.path)
        if len(answered) <= len(limits):
            return httpx.Response(429, headers=limits[len(answered) - 1], json={"error": {"message": "slow down"}})
        return httpx.Response(200, json={"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                         "choices": [{"index": 0, "finish_reason": "stop",
                                                      "message": {"role": "assistant", "content": "hi"}}]})
    return httpx.MockTransport(handle), answered


def test_a_rate_limit_is_waited_out_and_said_then_the_cell_goes_on(capsys):
    transport, answered = limited_then_answering([{"retry-after": "7"}, {}, {"retry-after": "0"}])
    waits = []
    http = client.ExplainingHttpClient("nvidia", sleep=waits.append, transport=transport)
    reply = openai.OpenAI(base_url="http://x/v1", api_key="k", http_client=http, max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "hi" and len(answered) == 4
    assert waits == [7, client.RATE_LIMIT_WAITS[1], 1.0]  # the server's Retry-After, else longer each time; never 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"nvidia: the server is busy or rate-limiting (HTTP 429): waiting {w:.0f} s, then asking again"
                     for w in waits]


def test_past_its_patience_a_rate_limit_is_the_openai_clients_error():
    transport, answered = limited_then_answering([{"retry-after": "100"}] * 10)
    waits = []
    http = client.ExplainingHttpClient("nvidia", sleep=waits.append, transport=transport)
    with pytest.raises(openai.RateLimitError):
        openai.OpenAI(base_url="http://x/v1", api_key="k", http_client=http, max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}])
    assert sum(waits) == client.RATE_LIMIT_PATIENCE and max(waits) == client.LONGEST_WAIT
