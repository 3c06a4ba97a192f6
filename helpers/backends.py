"""Which model answers, and how it spells guided JSON: the one place that chooses a backend.

`connect()` reads the environment (then a `.env` file, then Colab secrets) and returns
a `Connection`: an official `openai.OpenAI` client, the model name, and a `Profile`
whose `guided(schema)` gives the request fields that backend understands.

| backend   | chosen when                        | dialect            |
| --------- | ---------------------------------- | ------------------ |
| nvidia    | NVIDIA_API_KEY is set              | nvext              |
| hcompany  | HAI_API_KEY is set                 | structured_outputs |
| openai    | OPENAI_BASE_URL is set             | response_format    |
| embedded  | none of the above (the default)    | response_format    |

`WORKSHOP_BACKEND`, `WORKSHOP_MODEL` and `WORKSHOP_DIALECT` override the choice.
API keys are read, handed to the client and never printed, logged or stored.
"""
from __future__ import annotations

import getpass
import os
import sys
from dataclasses import dataclass, replace
from typing import Any

from helpers.dialects import DIALECTS, guided_json
from helpers.server import MODEL_ID


@dataclass(frozen=True)
class Profile:
    """A backend: where it lives, which model, and which guided-decoding dialect it speaks."""

    name: str
    base_url: str
    model: str
    dialect: str
    key_name: str | None = None
    dialects_spoken: frozenset[str] = frozenset()

    def guided(self, schema: dict, name: str = "output") -> dict[str, Any]:
        """Extra arguments for `chat.completions.create` that constrain the reply to `schema`."""
        return guided_json(self.dialect, schema, name)

    def prompt_only(self) -> dict[str, Any]:
        """Extra arguments for an unconstrained request: none; the schema lives in the prompt alone."""
        return {}

    def system_prompt(self, text: str) -> str:
        # Nemotron models on the API Catalog reason at length unless told not to.
        return f"/no_think\n{text}" if "nemotron" in self.model.lower() else text


PROFILES: dict[str, Profile] = {
    "embedded": Profile("embedded", "", MODEL_ID, "response_format", None, frozenset(DIALECTS)),
    "nvidia": Profile("nvidia", "https://integrate.api.nvidia.com/v1", "meta/llama-3.1-8b-instruct", "nvext",
                      "NVIDIA_API_KEY", frozenset({"nvext", "prompt_only"})),
    "hcompany": Profile("hcompany", "https://api.hcompany.ai/v1/", "holo3-122b-a10b", "structured_outputs",
                        "HAI_API_KEY", frozenset({"structured_outputs", "prompt_only"})),
    "openai": Profile("openai", "", "", "response_format", "OPENAI_API_KEY"),
}


EMBEDDED_RETRIES = 6


@dataclass
class Connection:
    client: Any
    model: str
    profile: Profile

    def __repr__(self) -> str:
        return f"Connection(backend={self.profile.name!r}, model={self.model!r}, dialect={self.profile.dialect!r})"

    def describe(self) -> str:
        where = self.profile.base_url or "(started on demand)"
        return (f"backend: {self.profile.name}\nmodel:   {self.model}\ndialect: {self.profile.dialect} "
                f"- {DIALECTS[self.profile.dialect]}\nurl:     {where}")


def _dotenv(name: str) -> str | None:
    try:
        from dotenv import dotenv_values, find_dotenv
    except ImportError:
        return None
    path = find_dotenv(usecwd=True)
    return dotenv_values(path).get(name) if path else None


def _colab_secret(name: str) -> str | None:
    if "google.colab" not in sys.modules:
        return None
    try:
        from google.colab import userdata
        return userdata.get(name)
    except Exception:  # secret absent or access not granted: both simply mean "not set"
        return None


def setting(name: str) -> str | None:
    """A setting or secret from the environment, else a `.env` file, else Colab's secrets panel."""
    for source in (os.environ.get, _dotenv, _colab_secret):
        value = source(name)
        if value:
            return value.strip()
    return None


def choose_backend() -> str:
    """The backend name the environment asks for (see the module docstring for the order)."""
    explicit = setting("WORKSHOP_BACKEND")
    if explicit:
        if explicit not in PROFILES:
            raise ValueError(f"WORKSHOP_BACKEND={explicit!r}; choose one of {', '.join(PROFILES)}")
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
    raise RuntimeError(f"the {profile.name} backend needs {profile.key_name}: set it in the environment, "
                       "a .env file or Colab's secrets panel")


def resolve_profile(backend: str | None = None, model: str | None = None, dialect: str | None = None) -> Profile:
    """The profile for `backend` with the model, dialect and URL overrides applied."""
    profile = PROFILES[backend or choose_backend()]
    if profile.name == "openai":
        base = setting("OPENAI_BASE_URL")
        if not base:
            raise RuntimeError("the openai backend needs OPENAI_BASE_URL, e.g. http://localhost:8000/v1 for vLLM")
        profile = replace(profile, base_url=base)
    profile = replace(profile, model=model or setting("WORKSHOP_MODEL") or profile.model,
                      dialect=dialect or setting("WORKSHOP_DIALECT") or profile.dialect)
    # A server is only known to speak the dialect it was configured with (and plain prompts).
    profile = replace(profile, dialects_spoken=profile.dialects_spoken | {profile.dialect, "prompt_only"})
    if profile.dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {profile.dialect!r}; choose one of {', '.join(DIALECTS)}")
    return profile


def embedded_client(base_url: str):
    """An OpenAI client for the embedded server at `base_url`."""
    from openai import DefaultHttpxClient, OpenAI

    # Loopback must not go through a proxy configured for the internet. One model serves requests in
    # turn, so a queued request may wait a while; a full queue answers 429 with Retry-After, which the
    # client honours a bounded number of times (the server marks every other error as not worth retrying).
    return OpenAI(base_url=base_url, api_key="embedded", max_retries=EMBEDDED_RETRIES, timeout=600,
                  http_client=DefaultHttpxClient(trust_env=False))


def connect(backend: str | None = None, *, model: str | None = None, dialect: str | None = None) -> Connection:
    """An OpenAI client for the chosen backend, its model and its guided-JSON spelling."""
    from openai import OpenAI

    profile = resolve_profile(backend, model, dialect)
    if profile.name == "embedded":
        from helpers.server.control import ensure_server
        profile = replace(profile, base_url=ensure_server())
        client = embedded_client(profile.base_url)
    else:
        client = OpenAI(base_url=profile.base_url, api_key=_api_key(profile))
    if not profile.model:
        profile = replace(profile, model=client.models.list().data[0].id)
    return Connection(client, profile.model, profile)
