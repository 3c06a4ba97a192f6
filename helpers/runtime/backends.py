"""Which model answers, and how it spells guided JSON: the one place that chooses a backend.

`connect()` reads the settings (the environment, then a `.env` file, then Colab secrets: `settings`) and returns
a `Connection`: an official `openai` client (`client`), the model name, and a `Profile` (`profiles`) whose
`guided(schema)` gives the request fields that backend understands.

| backend   | chosen when                        | dialect                                                          |
| --------- | ---------------------------------- | ---------------------------------------------------------------- |
| nvidia    | NVIDIA_API_KEY is set              | probed: nvext, as NIM documents it, first (NVIDIA_BASE_URL: a NIM of your own) |
| hcompany  | HAI_API_KEY is set                 | probed: structured_outputs, as H Company documents it, first     |
| openai    | OPENAI_BASE_URL is set             | probed: the first enforced dialect in PROBE_ORDER                |
| embedded  | none of the above (the default)    | response_format (the embedded server speaks them all)            |

No server's guidance is trusted before it is seen at work: `connect()` probes every backend but the embedded one,
its documented dialect first, and stops at the first one enforced; where none is, the connection is prompt-only and
its description says so plainly, once. `WORKSHOP_BACKEND`, `WORKSHOP_MODEL` and `WORKSHOP_DIALECT` override the
choice; an explicit dialect is kept, probed alone, and said to be unenforced where it is.

A profile also says whether its model sees images (`sees_images`): the embedded SmolLM2 and the nvidia
default, meta/llama-3.1-8b-instruct, read text only; H Company's Holo3 takes screenshots. For the openai
backend, `connect()` asks once (`probe_images`, in `probes`, says how). Only "sees" sends screenshots.
`WORKSHOP_IMAGES=yes` or `no` overrides the probe.

`python -m helpers.runtime.backends` shows the active backend; `--probe` also runs the dialect probe (`probes`).

API keys are read, handed to the client and never printed, logged or stored.
"""
from __future__ import annotations

import argparse
import getpass
import sys
from dataclasses import replace
from typing import Any

import openai

from helpers.runtime.client import backend_client, embedded_client
from helpers.runtime.dialects import DIALECTS
from helpers.runtime.probes import PROBE_ORDER, ProbeResult, probe, probe_images
from helpers.runtime.profiles import (BASE_URL_SETTINGS, DIALECT_SETTING, IMAGES_NOT_PROBED, PROFILES, Connection,
                                      Profile, dialect_by_setting, unreachable, url_origin)
from helpers.runtime.quoting import server_message
from helpers.runtime.settings import BackendError, SettingError, as_set, setting

IMAGE_SETTINGS = {"yes": True, "no": False}
PASSED = "passed to connect()"


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
    if profile.name == "openai" and not setting("OPENAI_BASE_URL"):
        raise BackendError("the openai backend needs OPENAI_BASE_URL, e.g. http://localhost:8000/v1 for vLLM")
    if (name := BASE_URL_SETTINGS.get(profile.name)) and (base := setting(name)):
        if not base.lower().startswith(("http://", "https://")):
            raise SettingError(f"{as_set(name)} is not a URL: write it as http://HOST:PORT/v1, or remove it")
        profile = replace(profile, base_url=base)
    profile = replace(profile, model=model or setting("WORKSHOP_MODEL") or profile.model)
    if dialect or setting("WORKSHOP_DIALECT"):
        profile = replace(profile, dialect=dialect or setting("WORKSHOP_DIALECT"),
                          dialect_reason=PASSED if dialect else DIALECT_SETTING)
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


def probe_order(profile: Profile) -> tuple[str, ...]:
    """The dialects `connect()` asks a backend about, in order: the one set by hand alone; else the backend's own
    (its documented one) first, then the others in PROBE_ORDER."""
    if dialect_by_setting(profile) or profile.dialect_reason == PASSED:
        return (profile.dialect,)
    return (profile.dialect, *(d for d in PROBE_ORDER if d != profile.dialect))


def _probed_profile(profile: Profile, result: ProbeResult) -> Profile:
    """The profile with the dialect the probe found enforced (the first of `probe_order`), else prompt_only; a
    dialect set by hand is kept, enforced or not (`Connection.describe` then says it is not)."""
    verdicts = result.verdicts
    seen = ", ".join(f"{d} {v}" for d, v in verdicts)
    if dialect_by_setting(profile) or profile.dialect_reason == PASSED:
        return replace(profile, probe_verdicts=verdicts)
    if not result.enforced:
        return replace(profile, dialect="prompt_only", dialects_spoken=frozenset({"prompt_only"}),
                       dialect_reason=f"probed: this server enforces no guided JSON ({seen}), so every guided cell "
                                      "asks in the prompt alone, and the ladder's fallback stands in for what it "
                                      "cannot repair",
                       probe_verdicts=verdicts)
    picked = result.enforced[0]
    seen = ", ".join(f"{d} {v}" for d, v in verdicts[:[d for d, _ in verdicts].index(picked) + 1])
    return replace(profile, dialect=picked, dialects_spoken=frozenset({*result.enforced, "prompt_only"}),
                   dialect_reason=f"probed in order: {seen}", probe_verdicts=verdicts)


def probe_the_rest(connection: Connection) -> None:
    """Ask about every dialect `connect()` did not reach. It stops at the first enforced one, to spare a rate-limited
    key; a benchmark that compares the spellings needs a verdict for each one it measures or skips."""
    profile = connection.profile
    if profile.name == "embedded":
        return
    result = probe(connection, show=False, order=probe_order(profile))
    connection.profile = replace(profile, probe_verdicts=result.verdicts,
                                 dialects_spoken=profile.dialects_spoken | set(result.enforced))


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
        from helpers.runtime.embedded import MODEL_ID, ServerError, ensure_server
        try:
            server = ensure_server()
        except ServerError as exc:
            raise BackendError(str(exc)) from None
        profile = replace(profile, base_url=server.url, model=model or setting("WORKSHOP_MODEL") or server.model)
        if server.model != MODEL_ID:  # a room's own model (WORKSHOP_MODEL_FILE), served as text like the bundled one
            profile = replace(profile, images_reason=f"the embedded server refuses images ({server.model} is served "
                                                     "as a text model)")
        client = embedded_client(server.url, server.key)
    else:
        client = backend_client(profile.name, profile.base_url, _api_key(profile))
    if not profile.model:
        profile = replace(profile, model=_first_model(client, profile))
    connection = Connection(client, profile.model, profile)
    if profile.name != "embedded":
        connection.profile = _probed_profile(profile, probe(connection, show=False, order=probe_order(profile),
                                                            until_enforced=True))
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
