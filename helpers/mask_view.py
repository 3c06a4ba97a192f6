"""Look inside guided decoding: per token, how many tokens the grammar allowed and what it changed.

Uses the embedded server's `x_trace` extension; other servers do not expose their masks.
"""
from __future__ import annotations

from helpers.runtime.dialects import with_trace


def mask_trace(conn, messages: list[dict], schema: dict, max_tokens: int = 120) -> tuple[str, list[dict]]:
    """One guided request with a per-token trace: the reply text and one dict per generated token."""
    reply = conn.client.chat.completions.create(model=conn.model, messages=messages, temperature=0,
                                                max_tokens=max_tokens,
                                                **with_trace(conn.profile.guided(schema, name="traced")))
    trace = (reply.model_extra or {}).get("trace")
    if trace is None:
        raise RuntimeError(f"the {conn.profile.name} backend returns no mask trace; only the embedded server does")
    return reply.choices[0].message.content, trace
