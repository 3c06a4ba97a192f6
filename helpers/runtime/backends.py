"""Which model answers, and how it spells guided JSON: the one place that chooses a backend.

`connect()` reads the environment (then a `.env` file, then Colab secrets) and returns
a `Connection`: an official `openai` client, the model name, and a `Profile` whose
`guided(schema)` gives the request fields that backend understands.

| backend   | chosen when                        | dialect                                                 |
| --------- | ---------------------------------- | ------------------------------------------------------- |
| nvidia    | NVIDIA_API_KEY is set              | nvext, as NIM documents it                              |
| hcompany  | HAI_API_KEY is set                 | structured_outputs, as H Company documents it           |
| openai    | OPENAI_BASE_URL is set             | probed: the first enforced dialect in PROBE_ORDER       |
| embedded  | none of the above (the default)    | response_format (the embedded server speaks them all)   |

`WORKSHOP_BACKEND`, `WORKSHOP_MODEL` and `WORKSHOP_DIALECT` override the choice; an explicit
dialect is obeyed without probing.

A profile also says whether its model sees images (`sees_images`): the embedded SmolLM2 and the nvidia
default, meta/llama-3.1-8b-instruct, read text only; H Company's Holo3 takes screenshots. For the openai
backend, `connect()` asks once (`probe_images`): one request with a tiny two-colour image, asking for its
colours. The model **sees** images when it names both; the server **refused** them when it answers an error
(llama-cpp-python's server does, with a 500, for a text-only model); the image was **ignored** when the reply
does not name them: the server took the request and the model answered as if the image were not there.
Only "sees" sends screenshots. `WORKSHOP_IMAGES=yes` or `no` overrides the probe.

`probe(connection)` (or `python -m helpers.runtime.backends --probe`) sends one small request per dialect,
asking for a reply that matches a schema no unguided model satisfies by chance, and classifies
each dialect as **enforced** (the reply matches), **ignored** (an answer, but the reply does not
match: the server dropped the field, or fell back to "any JSON") or **rejected** (an error, with
the server's words). Ignored is the dangerous one: the request succeeds and nothing is enforced.

A server that refuses a guided request answers an error, and the client raises its own error for that status
(`openai.BadRequestError` for a 400, `openai.InternalServerError` for a 500), so code that catches it still does;
its message names the backend, the dialect sent, the server's own words (on one line, the key blanked) and the fix.
The client's `http_client`, which its documentation offers for proxies and transports, does this: an
`ExplainingHttpClient` is the default one (`openai.DefaultHttpxClient`) whose `send`, the public method every
request of an `httpx` client goes through, answers a refused guided request with the server's status and headers
and an explained message; the openai client then raises and retries as it would have. Not an override of the
client's private methods (an SDK update changes them without a word); not an exception raised in an `httpx` event
hook or transport (the openai client takes any as a lost connection: it retries, then raises
`APIConnectionError`); not a `transport=` of its own (`httpx` then ignores the proxy the environment sets, and the
NVIDIA or H Company API behind one could not be reached). The error being the client's own, a notebook shows its
traceback through the client, the explanation last. Plain requests' errors are left as the client raises them.

API keys are read, handed to the client and never printed, logged or stored.
"""
from __future__ import annotations

import argparse
import functools
import getpass
import json
import os
import secrets
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from helpers.runtime.dialects import DIALECTS, Constraint, guided_json, request_fields
from helpers.runtime.embedded import MODEL_ID


@dataclass(frozen=True)
class Profile:
    """A backend: where it lives, which model, which guided-decoding dialect it speaks, and why that one."""

    name: str
    base_url: str
    model: str
    dialect: str
    key_name: str | None = None
    dialects_spoken: frozenset[str] = frozenset()
    dialect_reason: str = ""
    probe_verdicts: tuple[tuple[str, str], ...] = ()
    sees_images: bool = False
    images_reason: str = ""

    def guided(self, schema: dict, name: str = "output") -> dict[str, Any]:
        """Extra arguments for `chat.completions.create` that constrain the reply to `schema`."""
        return guided_json(self.dialect, schema, name)

    def prompt_only(self) -> dict[str, Any]:
        """Extra arguments for an unconstrained request: none; the schema lives in the prompt alone."""
        return {}

    def system_prompt(self, text: str) -> str:
        # Nemotron models on the API Catalog reason at length unless told not to.
        return f"/no_think\n\n{text}" if "nemotron" in self.model.lower() else text  # the NIM workshop's spelling


NOT_PROBED = "not probed yet: connect() asks the server which dialects it enforces"
DIALECT_SETTING = "set by WORKSHOP_DIALECT"
IMAGES_NOT_PROBED = "not probed yet: connect() sends the server one tiny image"
PROFILES: dict[str, Profile] = {
    "embedded": Profile("embedded", "", MODEL_ID, "response_format", None, frozenset(DIALECTS),
                        "the embedded server enforces every dialect; response_format is OpenAI's own spelling",
                        images_reason="SmolLM2-135M-Instruct reads text only; the embedded server refuses images"),
    "nvidia": Profile("nvidia", "https://integrate.api.nvidia.com/v1", "meta/llama-3.1-8b-instruct", "nvext",
                      "NVIDIA_API_KEY", frozenset({"nvext", "prompt_only"}),
                      "NIM's documented spelling (python -m helpers.runtime.backends --probe checks it)",
                      images_reason="meta/llama-3.1-8b-instruct reads text only (another model: set WORKSHOP_IMAGES)"),
    "hcompany": Profile("hcompany", "https://api.hcompany.ai/v1/", "holo3-122b-a10b", "structured_outputs",
                        "HAI_API_KEY", frozenset({"structured_outputs", "prompt_only"}),
                        "H Company's documented spelling (python -m helpers.runtime.backends --probe checks it)",
                        sees_images=True, images_reason="Holo3 takes screenshots"),
    "openai": Profile("openai", "", "", "response_format", "OPENAI_API_KEY", dialect_reason=NOT_PROBED,
                      images_reason=IMAGES_NOT_PROBED),
}

IMAGE_SETTINGS = {"yes": True, "no": False}
# OpenAI's own spelling first (most servers speak it), then vLLM's current one, then the spellings
# only one server family uses: llama-cpp-python, vLLM <= 0.11, NIM 1.x.
PROBE_ORDER = ("response_format", "structured_outputs", "json_object_schema", "guided_json", "nvext")
EMBEDDED_RETRIES = 6
# Keys the workshop itself hands to servers that need none; anything else is a secret to keep out of messages.
PLACEHOLDER_KEYS = {"not-needed"}
SERVER_MESSAGE_CHARS = 200
# Where an explained refusal keeps the server's own words, beside the message that quotes them.
SERVER_WORDS = "server_message"
CHAT_PATH = "chat/completions"  # below the base URL, where the openai client asks for a chat completion
# What describes a body rather than the answer: an explained body has its own.
BODY_HEADERS = {"content-length", "content-type", "content-encoding", "transfer-encoding"}


class ShortTraceback:
    """An error whose message says everything: IPython shows the message, not a traceback through library code."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class BackendError(ShortTraceback, RuntimeError):
    """The backend cannot be used as configured; the message says what to change."""


class SettingError(BackendError, ValueError):
    """A setting the reader typed has a value the workshop cannot use; the message names it, where it was read,
    and what to set instead."""


@dataclass
class Connection:
    client: Any
    model: str
    profile: Profile

    def __repr__(self) -> str:
        return f"Connection(backend={self.profile.name!r}, model={self.model!r}, dialect={self.profile.dialect!r})"

    def describe(self) -> str:
        where = self.profile.base_url or "(started on demand)"
        images = "screenshots" if self.profile.sees_images else "text only"
        return (f"backend: {self.profile.name}\nmodel:   {self.model}\ndialect: {self.profile.dialect} "
                f"- {DIALECTS[self.profile.dialect]}\nwhy:     {self.profile.dialect_reason}\n"
                f"images:  {images} - {self.profile.images_reason}\nurl:     {where}")


# --- settings -------------------------------------------------------------------------------------------------

def _dotenv(name: str) -> str | None:
    """A setting from the `.env` file at the checkout's root, and nowhere else: looked up through the parent folders,
    a checkout under /tmp would read a `.env` any user can plant there, and send prompts and keys where it says."""
    try:
        from dotenv import dotenv_values
    except ImportError:
        return None
    from helpers.runtime.paths import ROOT

    path = ROOT / ".env"
    return dotenv_values(path).get(name) if path.is_file() else None


def _colab_secret(name: str) -> str | None:
    if "google.colab" not in sys.modules:
        return None
    try:
        from google.colab import userdata
        return userdata.get(name)
    except Exception:  # secret absent or access not granted: both simply mean "not set"
        return None


def _found(name: str) -> tuple[str, str] | None:
    """A setting's value and where it was read: the environment, the `.env` file (its path) or Colab's secrets."""
    from helpers.runtime.paths import ROOT

    for where, source in (("the environment", os.environ.get), (str(ROOT / ".env"), _dotenv),
                          ("Colab's Secrets panel", _colab_secret)):
        value = source(name)
        if value:
            return value.strip(), where
    return None


def setting(name: str) -> str | None:
    """A setting or secret from the environment, else a `.env` file, else Colab's secrets panel."""
    found = _found(name)
    return found[0] if found else None


def as_set(name: str) -> str:
    """A setting as an error message shows it, with where it was read, so that the reader knows what to change.
    Never for a key."""
    value, where = _found(name) or ("", "nowhere")
    return f"{name}={value!r} (from {where})"


def choose_backend() -> str:
    """The backend name the environment asks for (see the module docstring for the order)."""
    explicit = setting("WORKSHOP_BACKEND")
    if explicit:
        if explicit not in PROFILES:
            raise SettingError(f"{as_set('WORKSHOP_BACKEND')} is no backend: set it to one of {', '.join(PROFILES)}, "
                               "or unset it")
        return explicit
    for backend, key in (("nvidia", "NVIDIA_API_KEY"), ("hcompany", "HAI_API_KEY"), ("openai", "OPENAI_BASE_URL")):
        if setting(key):
            return backend
    return "embedded"


def _api_key(profile: Profile) -> str:
    key = setting(profile.key_name) if profile.key_name else None
    if key:
        return key
    if profile.name == "openai":
        return "not-needed"  # vLLM, Ollama and self-hosted NIM often run without a key
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(f"{profile.key_name} (input hidden): ").strip()
    raise BackendError(f"the {profile.name} backend needs {profile.key_name}: set it in the environment, "
                       "a .env file or Colab's secrets panel")


def resolve_profile(backend: str | None = None, model: str | None = None, dialect: str | None = None) -> Profile:
    """The profile for `backend` with the model, dialect and URL overrides applied; no network call.

    For the openai backend without an explicit dialect, the dialect is a placeholder until `connect()` probes.
    """
    profile = PROFILES[backend or choose_backend()]
    if profile.name == "openai":
        base = setting("OPENAI_BASE_URL")
        if not base:
            raise BackendError("the openai backend needs OPENAI_BASE_URL, e.g. http://localhost:8000/v1 for vLLM")
        if not base.lower().startswith(("http://", "https://")):
            raise SettingError(f"{as_set('OPENAI_BASE_URL')} is not a URL: write it as http://HOST:PORT/v1, or remove "
                               "it to use the embedded model")
        profile = replace(profile, base_url=base)
    profile = replace(profile, model=model or setting("WORKSHOP_MODEL") or profile.model)
    if dialect or setting("WORKSHOP_DIALECT"):
        profile = replace(profile, dialect=dialect or setting("WORKSHOP_DIALECT"),
                          dialect_reason="passed to connect()" if dialect else DIALECT_SETTING)
    if profile.dialect not in DIALECTS:
        if dialect:
            raise ValueError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
        raise SettingError(f"unknown dialect in {as_set('WORKSHOP_DIALECT')}: set it to one of {', '.join(DIALECTS)}, "
                           "or unset it")
    images = setting("WORKSHOP_IMAGES")
    if images:
        if images.lower() not in IMAGE_SETTINGS:
            raise SettingError(f"{as_set('WORKSHOP_IMAGES')}: set it to yes or no, or unset it")
        profile = replace(profile, sees_images=IMAGE_SETTINGS[images.lower()], images_reason="set by WORKSHOP_IMAGES")
    # A server is only known to speak the dialect it was configured with (and plain prompts).
    return replace(profile, dialects_spoken=profile.dialects_spoken | {profile.dialect, "prompt_only"})


def dialect_by_setting(profile: Profile) -> bool:
    return profile.dialect_reason == DIALECT_SETTING


def url_origin(profile: Profile) -> str:
    """Where a server's address was set, for a message about it: the reader fixes it there."""
    found = _found("OPENAI_BASE_URL") if profile.name == "openai" else None
    return f" (OPENAI_BASE_URL, from {found[1]})" if found else ""


def unreachable(profile: Profile, error: openai.APIConnectionError) -> BackendError:
    return BackendError(f"cannot reach the {profile.name} backend at {profile.base_url}{url_origin(profile)}, "
                        f"{type(error).__name__}: is the server running, and is that address right?")


# --- the client: the official one, with guided-request errors explained ----------------------------------------

@functools.cache
def _guided_paths() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Where each dialect puts its constraint in a request body, read off `request_fields` (the one source)."""
    # A schema every dialect sends unchanged (response_format rewrites others into OpenAI's strict subset).
    mark = {"type": "object", "properties": {}, "required": [], "additionalProperties": False,
            "description": "where the constraint goes"}

    def path_to(value: Any) -> tuple[str, ...] | None:
        if value == mark:
            return ()
        for key, inner in value.items() if isinstance(value, dict) else ():
            found = path_to(inner)
            if found is not None:
                return (key, *found)
        return None

    paths = []
    for dialect in DIALECTS:
        for kind in ("json_schema", "choice", "regex"):
            try:
                fields = request_fields(dialect, Constraint(kind, mark))
            except ValueError:  # the dialect has no spelling for this kind of constraint
                continue
            body = {**fields.pop("extra_body", {}), **fields}
            if (path := path_to(body)) is not None:
                paths.append((dialect, path))
    return tuple(paths)


def dialect_sent(body: bytes | str) -> str | None:
    """The dialect a chat-completions request body asked for guided decoding in; None for a plain request."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    for dialect, path in _guided_paths():
        value = data
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            return dialect
    return None


def _body(response: Any) -> Any:
    """An answer's body: its JSON, else its text."""
    try:
        return response.json()
    except ValueError:
        return response.text


def server_message(response: Any, key: str | None = None) -> str:
    """The server's own words in an error answer (an `httpx` response; an `openai` error's `.response`), on one line,
    with `key` blanked out should the server echo it; long ones (some servers add a traceback) are cut. An explained
    refusal of a guided request keeps the words it quotes apart (SERVER_WORDS); those are the server's."""
    body = _body(response)
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        error = error.get(SERVER_WORDS) or error.get("message") or error.get("detail") or error
    text = error if isinstance(error, str) else json.dumps(error)
    words = " ".join((text or f"HTTP {response.status_code}").split())
    if key and key not in PLACEHOLDER_KEYS:
        words = words.replace(key, "[key]")
    return words if len(words) <= SERVER_MESSAGE_CHARS else words[:SERVER_MESSAGE_CHARS] + "..."


def _fix(dialect: str, enforced: Sequence[str] | None) -> str:
    """What to do about a refused guided request; `enforced`: the dialects the server is known to enforce, in
    PROBE_ORDER (None before a probe)."""
    if enforced and dialect in enforced:
        return (f"fix: this server enforces {dialect}, so the request itself is the problem: the server's "
                "message names it")
    if enforced:
        return (f"fix: this server enforces {', '.join(enforced)}: set WORKSHOP_DIALECT={enforced[0]} "
                "and restart the kernel")
    if enforced is not None:
        return "fix: this server enforces no dialect: set WORKSHOP_DIALECT=prompt_only, or use another server"
    return ("fix: run `python -m helpers.runtime.backends --probe` to see which dialects this server enforces, then set "
            "WORKSHOP_DIALECT to one of them (or, for the openai backend, unset it so that connect() probes) "
            "and restart the kernel")


class ExplainingHttpClient(openai.DefaultHttpxClient):
    """The HTTP client under the official `openai` client: the default one, except that a refused guided request's
    error answer comes back with its message explained (see the module docstring for why here). Requests and
    responses are typed Any: they are the `httpx` objects of whichever `httpx` the openai client uses (`httpx2` since
    openai 3), used only through what both offer."""

    def __init__(self, backend: str, enforced: Sequence[str] | None = None, **options: Any) -> None:
        """`enforced`: what the server enforces without a probe (the embedded server: every dialect); `options` go
        to the `httpx` client."""
        super().__init__(**options)
        self.backend, self.enforced = backend, enforced

    def send(self, request: Any, **options: Any) -> Any:
        # Every request passes here: the client's `request` and `stream` call it, and so does the openai client.
        response = super().send(request, **options)
        # Only a JSON body asks for guided decoding (a file upload is multipart, and not read into memory).
        if not response.is_error or "json" not in request.headers.get("content-type", ""):
            return response
        dialect = dialect_sent(request.content)
        if dialect is None:
            return response
        response.read()
        return self._explained(response, dialect)

    def _explained(self, response: Any, dialect: str) -> Any:
        """`response` with its error message saying which backend refused which dialect, in the server's words (the
        key blanked), and what to do; the status and headers are the server's, so the openai client raises the error
        it raises for that status, and retries as it would have."""
        request = response.request
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        said = server_message(response, key)
        base_url = str(request.url.copy_with(query=None)).removesuffix(CHAT_PATH)  # the probe's key, for a chat
        model = json.loads(request.content).get("model", "")
        enforced = enforced_at(base_url, model) if self.enforced is None else self.enforced
        body = _body(response)
        fields = body["error"] if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
        message = f"the {self.backend} backend refused a guided request in the {dialect} dialect: {said}\n"
        error = {**fields, "message": message + _fix(dialect, enforced), SERVER_WORDS: said}
        # The new body has its own length, type and encoding; every other header is the server's (x-should-retry too).
        headers = [(name, value) for name, value in response.headers.multi_items() if name.lower() not in BODY_HEADERS]
        explained = type(response)(response.status_code, headers=headers, json={"error": error}, request=request,
                                   extensions=response.extensions)
        explained.elapsed = response.elapsed
        return explained


def embedded_client(base_url: str, key: str) -> openai.OpenAI:
    """An OpenAI client for the embedded server at `base_url`, which asks for `key`."""
    # Loopback must not go through a proxy configured for the internet. One model serves requests in
    # turn, so a queued request may wait a while; a full queue answers 429 with Retry-After, which the
    # client honours a bounded number of times (the server marks every other error as not worth retrying).
    return openai.OpenAI(base_url=base_url, api_key=key, max_retries=EMBEDDED_RETRIES, timeout=600,
                         http_client=ExplainingHttpClient("embedded", PROBE_ORDER, trust_env=False))


# --- the probe --------------------------------------------------------------------------------------------------

Verdict = Literal["enforced", "ignored", "rejected"]
PROBE_MAX_TOKENS = 100
PROBE_TIMEOUT_S = 120


class _ProbeDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")
    word: str = Field(max_length=12)


def probe_model(token: str) -> type[BaseModel]:
    """The probe's contract. A required `const` of a random token: no unguided model writes it by chance.
    Around it, the keywords the workshop's own schemas rely on ($ref, anyOf, enum, maxLength,
    additionalProperties: false): a server that cannot convert them and quietly falls back to
    "any JSON" fails the token, and so shows up as ignored."""
    return create_model("Probe", __config__=ConfigDict(extra="forbid"), token=(Literal[token], ...),
                        answer=(Literal["yes", "no"], ...), detail=(_ProbeDetail | None, ...))


@dataclass(frozen=True)
class DialectCheck:
    dialect: str
    verdict: Verdict
    detail: str
    seconds: float


@dataclass(frozen=True)
class ProbeResult:
    """What one server did with each dialect; `report(active)` adds what that means for the active one."""

    backend: str
    model: str
    base_url: str
    checks: tuple[DialectCheck, ...]

    @property
    def enforced(self) -> list[str]:
        return [c.dialect for c in self.checks if c.verdict == "enforced"]

    def check(self, dialect: str) -> DialectCheck | None:
        return next((c for c in self.checks if c.dialect == dialect), None)

    def table(self) -> str:
        rows = [f"| {c.dialect} | {c.verdict} | {c.detail.replace('|', '/')} |" for c in self.checks]
        return "\n".join(["| dialect | verdict | what happened |", "|---|---|---|", *rows])

    def fix(self, active: str, by_setting: bool = False) -> str:
        """What to set so that guided requests are enforced here; `by_setting`: WORKSHOP_DIALECT chose `active`."""
        if not self.enforced:
            return "this server enforces no dialect: use another server or backend (docs/backends.md)"
        wanted = self.enforced[0]
        if not by_setting:
            return f"set WORKSHOP_DIALECT={wanted}"
        # Unset, the openai backend probes and takes the first enforced dialect; the others take their documented one.
        default = wanted if self.backend == "openai" else PROFILES[self.backend].dialect
        if default in self.enforced:
            return f"unset WORKSHOP_DIALECT (now {active}) or set it to {wanted}"
        return f"set WORKSHOP_DIALECT={wanted} (now {active})"

    def advice(self, active: str, by_setting: bool = False) -> str:
        fix = f"{self.fix(active, by_setting)}, and restart the kernel."
        if active == "prompt_only":
            if not self.enforced:
                return ("No dialect is enforced here, so the active dialect is prompt_only: the guided cells "
                        "will show prompt-only behaviour.")
            return (f"The active dialect is prompt_only; this server enforces {', '.join(self.enforced)}. "
                    f"To guide the cells: {fix}")
        verdict = self.check(active).verdict
        if verdict == "enforced":
            return f"The active dialect, {active}, is enforced."
        effect = ("guided requests run unconstrained, like prompt-only" if verdict == "ignored"
                  else "guided requests fail")
        return f"Warning: the active dialect, {active}, was {verdict}: {effect}. Fix: {fix}"

    def report(self, active: str, by_setting: bool = False) -> str:
        return (f"probe of {self.base_url} (backend {self.backend}, model {self.model}):\n\n"
                f"{self.table()}\n\n{self.advice(active, by_setting)}")


_PROBED: dict[tuple[str, str], tuple[DialectCheck, ...]] = {}


def enforced_at(base_url: str, model: str) -> list[str] | None:
    """The dialects the probe found `base_url` enforcing for `model`, in PROBE_ORDER; None before a probe."""
    checks = _PROBED.get((base_url, model))
    return None if checks is None else [c.dialect for c in checks if c.verdict == "enforced"]


def _mismatch(model: type[BaseModel], text: str) -> str | None:
    """Why `text` is not a probe object (None when it is)."""
    try:
        json.loads(text)
    except ValueError:
        return f"the reply is not JSON: {' '.join(text.split())[:60]!r}"
    try:
        model.model_validate_json(text, strict=True)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the object'}: {e['type']}" for e in exc.errors())
        return f"the reply does not match the probe schema ({where})"
    return None


def _check(connection: Connection, dialect: str, model: type[BaseModel]) -> DialectCheck:
    # No retries: a 500 is a verdict, and a server that answers slowly should not be asked again.
    client = connection.client.with_options(max_retries=0, timeout=PROBE_TIMEOUT_S)
    messages = [{"role": "system", "content": connection.profile.system_prompt("You are a helpful assistant.")},
                {"role": "user", "content": "Is the sky blue? Answer in one short sentence."}]
    started = time.perf_counter()
    try:
        reply = client.chat.completions.create(model=connection.model, messages=messages, temperature=0,
                                               max_tokens=PROBE_MAX_TOKENS,
                                               **guided_json(dialect, model.model_json_schema(), "probe"))
    except openai.RateLimitError:
        raise BackendError(f"the {connection.profile.name} backend is busy or rate-limited (HTTP 429): "
                           "run the probe again in a minute") from None
    except openai.APIStatusError as exc:
        said = server_message(exc.response, client.api_key)
        return DialectCheck(dialect, "rejected", f"HTTP {exc.status_code}: {said}", time.perf_counter() - started)
    except openai.APIConnectionError as exc:
        raise unreachable(connection.profile, exc) from None
    seconds = time.perf_counter() - started
    choice = reply.choices[0]
    problem = _mismatch(model, choice.message.content or "")
    if problem is None:
        return DialectCheck(dialect, "enforced", "the reply matched the probe schema", seconds)
    cut = " (cut by max_tokens)" if choice.finish_reason == "length" else ""
    return DialectCheck(dialect, "ignored", f"an answer, but {problem}{cut}", seconds)


def probe(connection: Connection, *, show: bool = True, refresh: bool = False) -> ProbeResult:
    """Ask the server once per dialect in PROBE_ORDER and classify each; cached per base URL and model
    for the life of the process. `show` prints the table and what it means for the active dialect."""
    key = (str(connection.client.base_url), connection.model)
    if refresh or key not in _PROBED:
        model = probe_model(f"probe-{secrets.token_hex(3)}")
        _PROBED[key] = tuple(_check(connection, dialect, model) for dialect in PROBE_ORDER)
    result = ProbeResult(connection.profile.name, connection.model, connection.profile.base_url, _PROBED[key])
    if show:
        print(result.report(connection.profile.dialect, dialect_by_setting(connection.profile)))
    return result


# --- the image probe ----------------------------------------------------------------------------------------------

ImageVerdict = Literal["sees", "refused", "ignored"]
COLOURS = {"red": (220, 30, 30), "green": (30, 160, 60), "blue": (40, 70, 220), "yellow": (240, 220, 40),
           "black": (0, 0, 0), "white": (255, 255, 255)}
IMAGE_PROBE_TOKENS = 20


@dataclass(frozen=True)
class ImageCheck:
    verdict: ImageVerdict
    detail: str


def two_colour_png(left: str, right: str) -> bytes:
    """A 16x8 PNG: its left half one colour of COLOURS, its right half another."""
    import io

    from PIL import Image

    image = Image.new("RGB", (16, 8), COLOURS[left])
    image.paste(COLOURS[right], (8, 0, 16, 8))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def image_probe_message(left: str, right: str) -> dict:
    import base64

    url = "data:image/png;base64," + base64.b64encode(two_colour_png(left, right)).decode()
    return {"role": "user", "content": [
        {"type": "text", "text": "The image has two halves, each one flat colour. Name the colour of the left "
                                 "half, then of the right half, in two words."},
        {"type": "image_url", "image_url": {"url": url}}]}


def probe_images(connection: Connection) -> ImageCheck:
    """Whether the model sees images: one request with a two-colour image, the colours drawn at random (a text-only
    model that names both by chance, in order, passes: 1 time in 30)."""
    left, right = secrets.SystemRandom().sample(sorted(COLOURS), 2)
    client = connection.client.with_options(max_retries=0, timeout=PROBE_TIMEOUT_S)
    try:
        reply = client.chat.completions.create(model=connection.model, messages=[image_probe_message(left, right)],
                                               temperature=0, max_tokens=IMAGE_PROBE_TOKENS)
    except openai.RateLimitError:
        raise BackendError(f"the {connection.profile.name} backend is busy or rate-limited (HTTP 429): "
                           "connect again in a minute") from None
    except openai.APIStatusError as exc:
        return ImageCheck("refused", f"HTTP {exc.status_code}: {server_message(exc.response, client.api_key)}")
    except openai.APIConnectionError as exc:
        raise unreachable(connection.profile, exc) from None
    said = " ".join((reply.choices[0].message.content or "").split())
    words = [word.strip(".,;:!?\"'()").lower() for word in said.split()]
    named = [word for word in words if word in COLOURS]
    if named[:2] == [left, right]:
        return ImageCheck("sees", f"asked for {left} and {right}, it said {said[:60]!r}")
    return ImageCheck("ignored", f"asked for {left} and {right}, it said {said[:60]!r}: an answer, "
                                 "as if the image were not there")


def _probed_profile(profile: Profile, result: ProbeResult) -> Profile:
    """The profile with the dialect the probe picked: the first enforced one in PROBE_ORDER, else prompt_only."""
    verdicts = tuple((c.dialect, c.verdict) for c in result.checks)
    if not result.enforced:
        seen = ", ".join(f"{d} {v}" for d, v in verdicts)
        warnings.warn(f"{profile.base_url} enforces no guided-decoding dialect ({seen}): falling back to "
                      "prompt_only, so the notebooks' guided cells will show prompt-only behaviour", stacklevel=3)
        return replace(profile, dialect="prompt_only", dialects_spoken=frozenset({"prompt_only"}),
                       dialect_reason=f"probed: no dialect enforced ({seen}), so prompt_only",
                       probe_verdicts=verdicts)
    picked = result.enforced[0]
    seen = ", ".join(f"{d} {v}" for d, v in verdicts[:[d for d, _ in verdicts].index(picked) + 1])
    return replace(profile, dialect=picked, dialects_spoken=frozenset({*result.enforced, "prompt_only"}),
                   dialect_reason=f"probed in order: {seen}", probe_verdicts=verdicts)


def _first_model(client: Any, profile: Profile) -> str:
    try:
        models = client.models.list().data
    except openai.APIConnectionError as exc:
        raise unreachable(profile, exc) from None
    except openai.APIStatusError as exc:
        said = server_message(exc.response, client.api_key)  # a server may echo the Authorization header in its error
        raise BackendError(f"the {profile.name} backend at {profile.base_url}{url_origin(profile)} answered HTTP "
                           f"{exc.status_code} when asked for its models: {said}; set WORKSHOP_MODEL, "
                           "or check the URL and OPENAI_API_KEY") from None
    if not models:
        raise BackendError(f"the {profile.name} backend at {profile.base_url} lists no model: set WORKSHOP_MODEL")
    return models[0].id


def connect(backend: str | None = None, *, model: str | None = None, dialect: str | None = None) -> Connection:
    """An OpenAI client for the chosen backend, its model and its guided-JSON spelling.

    For the openai backend with no dialect given (argument or WORKSHOP_DIALECT), the server is probed and
    the first enforced dialect in PROBE_ORDER is used; `connection.profile.dialect_reason` says why.
    """
    profile = resolve_profile(backend, model, dialect)
    if profile.name == "embedded":
        from helpers.runtime.embedded import ServerError, ensure_server
        try:
            server = ensure_server()
        except ServerError as exc:
            raise BackendError(str(exc)) from None
        profile = replace(profile, base_url=server.url)
        client = embedded_client(server.url, server.key)
    else:
        client = openai.OpenAI(base_url=profile.base_url, api_key=_api_key(profile),
                               http_client=ExplainingHttpClient(profile.name))
    if not profile.model:
        profile = replace(profile, model=_first_model(client, profile))
    connection = Connection(client, profile.model, profile)
    if profile.dialect_reason == NOT_PROBED:
        connection.profile = _probed_profile(profile, probe(connection, show=False))
    if profile.images_reason == IMAGES_NOT_PROBED:
        check = probe_images(connection)
        connection.profile = replace(connection.profile, sees_images=check.verdict == "sees",
                                     images_reason=f"probed: {check.verdict} ({check.detail})")
    return connection


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.runtime.backends",
                                     description="Show the active backend; --probe also asks it which "
                                                 "guided-decoding dialects it enforces.")
    parser.add_argument("--probe", action="store_true", help="send one small guided request per dialect")
    args = parser.parse_args(argv)
    try:
        connection = connect()
        print(connection.describe())
        if not args.probe:
            return 0
        print()
        result = probe(connection)
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if connection.profile.dialect in result.enforced else 1


if __name__ == "__main__":
    sys.exit(main())
