"""What each backend is: where it lives, which model, which guided-decoding dialect it speaks and why, whether its
model sees images (`PROFILES`); and a `Connection` to one. `helpers.runtime.backends` chooses among them, and applies
the settings that override a profile.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai

from helpers.runtime.dialects import DIALECTS, guided_json
from helpers.runtime.embedded import MODEL_ID
from helpers.runtime.settings import BackendError, setting_with_origin


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
                        images_reason="the embedded server refuses images (SmolLM2-135M-Instruct reads text only)"),
    "nvidia": Profile("nvidia", "https://integrate.api.nvidia.com/v1", "meta/llama-3.1-8b-instruct", "nvext",
                      "NVIDIA_API_KEY", frozenset({"nvext", "prompt_only"}),
                      NOT_PROBED,
                      images_reason="meta/llama-3.1-8b-instruct reads text only (another model: set WORKSHOP_IMAGES)"),
    "hcompany": Profile("hcompany", "https://api.hcompany.ai/v1/", "holo3-1-35b-a3b", "structured_outputs",
                        "HAI_API_KEY", frozenset({"structured_outputs", "prompt_only"}),
                        NOT_PROBED,
                        sees_images=True, images_reason="Holo3 takes screenshots"),
    "openai": Profile("openai", "", "", "response_format", "OPENAI_API_KEY", dialect_reason=NOT_PROBED,
                      images_reason=IMAGES_NOT_PROBED),
}


@dataclass
class Connection:
    """What `connect()` returns: the official `openai` client, the model's name and the backend's profile."""

    client: Any
    model: str
    profile: Profile

    def __repr__(self) -> str:
        return f"Connection(backend={self.profile.name!r}, model={self.model!r}, dialect={self.profile.dialect!r})"

    def describe(self) -> str:
        where = self.profile.base_url or "(started on demand)"
        images = "screenshots" if self.profile.sees_images else "text only"
        verdict = dict(self.profile.probe_verdicts).get(self.profile.dialect, "enforced")
        unguided = "" if verdict == "enforced" else (
            f"\nguided:  NOT ENFORCED: this server {verdict} the {self.profile.dialect} dialect you set, so the "
            "guided cells run as if prompt-only (python -m helpers.runtime.backends --probe says what it enforces)")
        return (f"backend: {self.profile.name}\nmodel:   {self.model}\ndialect: {self.profile.dialect} "
                f"- {DIALECTS[self.profile.dialect]}\nwhy:     {self.profile.dialect_reason}\n"
                f"images:  {images} - {self.profile.images_reason}\nurl:     {where}{unguided}")


def dialect_by_setting(profile: Profile) -> bool:
    return profile.dialect_reason == DIALECT_SETTING


# Where a backend's address may be set, for a server of one's own (a NIM a room runs, vLLM, Ollama...).
BASE_URL_SETTINGS = {"openai": "OPENAI_BASE_URL", "nvidia": "NVIDIA_BASE_URL", "hcompany": "HAI_BASE_URL"}


def url_origin(profile: Profile) -> str:
    """Where a server's address was set, for a message about it: the reader fixes it there."""
    name = BASE_URL_SETTINGS.get(profile.name)
    found = setting_with_origin(name) if name else None
    return f" ({name}, from {found[1]})" if found else ""


def unreachable(profile: Profile, error: openai.APIConnectionError) -> BackendError:
    return BackendError(f"cannot reach the {profile.name} backend at {profile.base_url}{url_origin(profile)}, "
                        f"{type(error).__name__}: is the server running, and is that address right?")
