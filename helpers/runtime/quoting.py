"""How a message quotes a server's error: the server's own words, on one line, cut short, and with the key blanked
should the server echo it. Every message that quotes a server does it through `server_message`, so none can show a
key.
"""
from __future__ import annotations

import json
from typing import Any

# Keys the workshop itself hands to servers that need none; anything else is a secret to keep out of messages.
PLACEHOLDER_KEYS = {"not-needed"}
SERVER_MESSAGE_CHARS = 200
# Where an explained refusal of a guided request keeps the server's own words, beside the message that quotes them.
SERVER_WORDS = "server_message"


def body_of(response: Any) -> Any:
    """An answer's body: its JSON, else its text."""
    try:
        return response.json()
    except ValueError:
        return response.text


def server_message(response: Any, key: str | None = None) -> str:
    """The server's own words in an error answer (an `httpx` response; an `openai` error's `.response`), on one line,
    with `key` blanked out should the server echo it; long ones (some servers add a traceback) are cut. An explained
    refusal of a guided request keeps the words it quotes apart (SERVER_WORDS); those are the server's."""
    body = body_of(response)
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        error = error.get(SERVER_WORDS) or error.get("message") or error.get("detail") or error
    text = error if isinstance(error, str) else json.dumps(error)
    words = " ".join((text or f"HTTP {response.status_code}").split())
    if key and key not in PLACEHOLDER_KEYS:
        words = words.replace(key, "[key]")
    return words if len(words) <= SERVER_MESSAGE_CHARS else words[:SERVER_MESSAGE_CHARS] + "..."
