"""Two probes that ask a server what it does, rather than trust what it documents.

`probe(connection)` (or `python -m helpers.runtime.backends --probe`) sends one small request per dialect,
asking for a reply that matches a schema no unguided model satisfies by chance, and classifies
each dialect as **enforced** (the reply matches), **ignored** (an answer, but the reply does not
match: the server dropped the field, or fell back to "any JSON") or **rejected** (an error, with
the server's words). Ignored is the dangerous one: the request succeeds and nothing is enforced.
The verdicts are kept per base URL and model for the life of the process.

`probe_images(connection)` asks whether the model sees images: one request with a tiny two-colour image, asking
for its colours. The model **sees** images when it names both; the server **refused** them when it answers an
error (llama-cpp-python's server does, with a 500, for a text-only model); the image was **ignored** when the reply
does not name them: the server took the request and the model answered as if the image were not there.
"""
from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Literal

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from helpers.runtime.dialects import guided_json
from helpers.runtime.profiles import Connection, dialect_by_setting, unreachable
from helpers.runtime.quoting import server_message
from helpers.runtime.settings import BackendError

Verdict = Literal["enforced", "ignored", "rejected"]
# OpenAI's own spelling first (most servers speak it), then vLLM's current one, then the spellings
# only one server family uses: llama-cpp-python, vLLM <= 0.11, NIM 1.x.
PROBE_ORDER = ("response_format", "structured_outputs", "json_object_schema", "guided_json", "nvext")
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

    @property
    def verdicts(self) -> tuple[tuple[str, str], ...]:
        """(dialect, verdict) for each dialect asked, in order: what a profile keeps of the probe."""
        return tuple((c.dialect, c.verdict) for c in self.checks)

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
        # Unset, connect() probes every backend and takes an enforced dialect (the documented one first).
        return f"unset WORKSHOP_DIALECT (now {active}) or set it to {wanted}"

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


# Per base URL and model, each dialect's check, as the probes of this process made them.
_PROBED: dict[tuple[str, str], dict[str, DialectCheck]] = {}


def enforced_at(base_url: str, model: str) -> list[str] | None:
    """The dialects the probe found `base_url` enforcing for `model`, in PROBE_ORDER; None while that is unknown:
    before a probe, or when none of the dialects asked so far is enforced and some were never asked."""
    checks = _PROBED.get((base_url, model), {})
    enforced = [d for d in PROBE_ORDER if d in checks and checks[d].verdict == "enforced"]
    return enforced if enforced or set(PROBE_ORDER) <= set(checks) else None


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


def probe(connection: Connection, *, show: bool = True, refresh: bool = False, order: tuple[str, ...] = PROBE_ORDER,
          until_enforced: bool = False) -> ProbeResult:
    """Ask the server once per dialect of `order` and classify each (stopping at the first enforced one when
    `until_enforced`: what `connect()` needs, in as few requests as a rate-limited key allows); each check cached per
    base URL and model for the life of the process. `show` prints the table and what it means for the active
    dialect."""
    key = (str(connection.client.base_url), connection.model)
    if refresh:
        _PROBED.pop(key, None)
    checks = _PROBED.setdefault(key, {})
    model = probe_model(f"probe-{secrets.token_hex(3)}")
    for dialect in order:
        if dialect not in checks:
            checks[dialect] = _check(connection, dialect, model)
        if until_enforced and checks[dialect].verdict == "enforced":
            break
    result = ProbeResult(connection.profile.name, connection.model, connection.profile.base_url,
                         tuple(checks[d] for d in order if d in checks))
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
