"""A guided reply, token by token: the text so far with the current token highlighted, how many tokens the grammar
allowed there, who chose it, and the model's top candidates before and after the mask.

Plain data in: the lesson module that knows who chose a token (notebook 05's `mask_view`) builds the `Token`s and
gives their colours and legend. `tokens_html` is the static rendering, every token of it; `token_explorer` the
widget.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field

from helpers.widgets.slider import slider_view


@dataclass
class Token:
    """One generated token, as plain data."""

    text: str
    allowed: int  # how many tokens the grammar allowed at this step
    chooser: str  # who chose it, in words
    colour: str  # the background that says who chose it
    before_mask: list[tuple[str, float]] = field(default_factory=list)  # the model's top candidates, unmasked
    after_mask: list[tuple[str, float]] = field(default_factory=list)  # the same, once the mask is applied


def span(token: Token, current: bool = False) -> str:
    outline = "outline:2px solid #222;font-weight:bold;" if current else ""
    return (f'<span style="background:{token.colour};border-radius:3px;{outline}" '
            f'title="{token.allowed:,} allowed">{html.escape(token.text)}</span>')


def legend_html(legend: dict[str, str]) -> str:
    """colour -> what it means, as coloured chips."""
    return " ".join(f'<span style="background:{colour};border-radius:3px;padding:0 4px">{html.escape(words)}</span>'
                    for colour, words in legend.items())


def candidates(pairs: list[tuple[str, float]]) -> str:
    return ", ".join(f"<code>{html.escape(repr(text))}</code> {p:.2f}" for text, p in pairs[:3]) or "not recorded"


def token_html(tokens: list[Token], number: int, legend: dict[str, str]) -> str:
    """Token `number` (1-based): the text so far, this token outlined, and what the step allowed."""
    token = tokens[number - 1]
    text = "".join(span(t, current=i == number - 1) for i, t in enumerate(tokens[:number]))
    return (f'<div style="font-family:monospace;white-space:pre-wrap;line-height:1.9">{text}</div>'
            f'<div style="font-family:sans-serif;font-size:13px;margin-top:6px">'
            f'token {number} of {len(tokens)}: <code>{html.escape(repr(token.text))}</code>, '
            f'<b>{html.escape(token.chooser)}</b>; the grammar allowed {token.allowed:,} '
            f'token{"" if token.allowed == 1 else "s"} here<br>'
            f'model\'s top 3 before the mask: {candidates(token.before_mask)}<br>'
            f'after the mask: {candidates(token.after_mask)}</div>'
            f'<div style="margin-top:6px">{legend_html(legend)}</div>')


def tokens_html(tokens: list[Token], legend: dict[str, str]) -> str:
    """The static rendering: the whole reply coloured by who chose each token, and, folded, one row per token."""
    rows = "".join(f'<tr><td>{n}</td><td>{span(t)}</td><td>{t.allowed:,}</td><td>{html.escape(t.chooser)}</td>'
                   f'<td>{candidates(t.after_mask)}</td></tr>' for n, t in enumerate(tokens, 1))
    table = ('<table style="font-size:12px"><tr><th>#</th><th>token</th><th>allowed</th><th>chosen by</th>'
             f'<th>top 3 after the mask</th></tr>{rows}</table>')
    text = "".join(span(t) for t in tokens)
    return (f'<div style="font-family:monospace;white-space:pre-wrap;line-height:1.9">{text}</div>'
            f'<div style="margin-top:6px">{legend_html(legend)}</div>'
            f'<details><summary>every token: how many were allowed, who chose it</summary>{table}</details>')


def token_explorer(tokens: list[Token], legend: dict[str, str]):
    """The widget: a slider over the tokens."""
    return slider_view(len(tokens), lambda n: (token_html(tokens, n, legend), None), "token")
