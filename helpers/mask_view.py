"""Look inside guided decoding: per token, how many tokens the grammar allowed, and who chose each token.

Uses the embedded server's `x_trace` extension; other servers do not expose their masks.
"""
from __future__ import annotations

from helpers.runtime.dialects import with_trace
from helpers.widgets.tokens import Token, token_explorer, tokens_html

# Who chose a token: the grammar, where it allowed exactly one; the model, where it allowed several.
COLOURS: dict[str, str] = {"grammar": "#f8c9c4", "model": "#c6ddf5"}
LEGEND: dict[str, str] = {"grammar": "forced by the grammar (one token allowed)",
                          "model": "chosen by the model (several allowed)"}


def mask_trace(conn, messages: list[dict], schema: dict, max_tokens: int = 120) -> tuple[str, list[dict]]:
    """One guided request with a per-token trace: the reply text and one dict per generated token."""
    reply = conn.client.chat.completions.create(model=conn.model, messages=messages, temperature=0,
                                                max_tokens=max_tokens,
                                                **with_trace(conn.profile.guided(schema, name="traced")))
    trace = (reply.model_extra or {}).get("trace")
    if trace is None:
        raise RuntimeError(f"the {conn.profile.name} backend returns no mask trace; only the embedded server does")
    return reply.choices[0].message.content, trace


def who_chose(step: dict) -> str:
    """'grammar' where the grammar allowed exactly one token at this step, 'model' where it allowed several."""
    return "grammar" if step["allowed"] == 1 else "model"


def forced_after(trace: list[dict], index: int) -> str:
    """The text the grammar forced right after token `index`: the tokens that follow it with one token allowed each
    (the rest of a tool's name, say, once its first token leaves one tool possible)."""
    forced = []
    for step in trace[index + 1:]:
        if who_chose(step) != "grammar":
            break
        forced.append(step["token"])
    return "".join(forced)


def tokens_of(trace: list[dict]) -> list[Token]:
    """The trace as the token views' plain data: each token with who chose it, in words and in colour."""
    return [Token(step["token"], step["allowed"], LEGEND[who_chose(step)], COLOURS[who_chose(step)],
                  [tuple(pair) for pair in step.get("top_before_mask", [])],
                  [tuple(pair) for pair in step.get("top_after_mask", [])]) for step in trace]


def legend() -> dict[str, str]:
    return {COLOURS[who]: words for who, words in LEGEND.items()}


def mask_page(trace: list[dict]) -> str:
    """The traced reply as HTML, each token on the colour of who chose it, with a legend and, folded, every token's
    row: the mask explorer's static rendering. Inline styles only, so it survives where a notebook is shown without
    its stylesheets (GitHub)."""
    return tokens_html(tokens_of(trace), legend())


def mask_explorer(trace: list[dict]):
    """A slider over the trace's tokens: the text so far, the current token, how many were allowed, who chose it."""
    return token_explorer(tokens_of(trace), legend())
