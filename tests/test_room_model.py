"""A room's own model (issue 49): WORKSHOP_MODEL_FILE names a GGUF chat model the embedded server serves in place of
the bundled SmolLM2, every output names it, and a file the engine cannot serve as a chat model is one line.

The instant tests need no model. The integration one starts a server of its own on the bundled model's file copied
under another name (a second of model load, one short completion: a few seconds).
"""
from __future__ import annotations

import shutil

import pytest

from helpers.runtime import embedded
from helpers.runtime.backends import connect
from helpers.runtime.embedded import MODEL_ID, ServerError, model_file, model_id
from helpers.server.engine import chat_template


def test_no_file_named_is_the_bundled_model(monkeypatch):
    monkeypatch.delenv("WORKSHOP_MODEL_FILE", raising=False)
    assert model_file() is None and model_id() == MODEL_ID


def test_a_file_is_named_by_its_name_and_found_from_the_checkout(monkeypatch, tmp_path):
    model = tmp_path / "Qwen2.5 Coder 0.5B.Q4_K_M.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("WORKSHOP_MODEL_FILE", str(model))
    assert model_file() == model and model_id() == "qwen2.5-coder-0.5b.q4_k_m"
    monkeypatch.setattr(embedded, "CHECKOUT", str(tmp_path))
    monkeypatch.setenv("WORKSHOP_MODEL_FILE", model.name)  # relative: to the checkout, wherever a kernel runs
    assert model_file() == model


def test_a_missing_file_is_one_line_that_says_what_to_set(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKSHOP_MODEL_FILE", str(tmp_path / "nothing.gguf"))
    with pytest.raises(ServerError, match=r"WORKSHOP_MODEL_FILE='.*nothing.gguf' \(from the environment\) names no file"):
        model_id()


def test_a_model_without_a_chat_template_is_refused_in_one_line(tmp_path):
    """The case of Gemma 3 270M's pre-trained GGUF (docs/results.md): a base model, no template to ask it in turns."""
    with pytest.raises(ServerError, match="has no chat template .* not a chat model, a base model perhaps"):
        chat_template({"general.architecture": "gemma3"}, tmp_path / "gemma270m.gguf")
    assert chat_template({"tokenizer.chat_template": "{{ messages }}"}, tmp_path / "x.gguf") == "{{ messages }}"


@pytest.mark.integration
def test_the_embedded_server_serves_the_rooms_file_and_says_which(monkeypatch, tmp_path):
    from helpers.server.engine import model_path

    room = tmp_path / "room-model.gguf"
    shutil.copyfile(model_path(), room)
    monkeypatch.setenv("WORKSHOP_MODEL_FILE", str(room))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a server folder of its own
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.delenv("WORKSHOP_PORT", raising=False)
    try:
        conn = connect()
        assert conn.model == "room-model" and "model:   room-model" in conn.describe()
        assert "images:  text only - the embedded server refuses images (room-model is served" in conn.describe()
        reply = conn.client.chat.completions.create(model=conn.model, max_tokens=4,
                                                    messages=[{"role": "user", "content": "Hi"}])
        assert reply.model == "room-model" and reply.choices[0].message.content is not None
        assert [m.id for m in conn.client.models.list().data] == ["room-model"]
        not_a_model = tmp_path / "notes.gguf"
        not_a_model.write_text("not a model")
        monkeypatch.setenv("WORKSHOP_MODEL_FILE", str(not_a_model))
        with pytest.raises(Exception, match="is not a model llama.cpp can load"):
            connect()  # the running server has another model: restarted, and the new one says why it cannot serve
    finally:
        embedded.stop_server()
