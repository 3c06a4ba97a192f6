"""The model comparison's goal step, on a stand-in engine (no model): a reading counts only when it is the task's
goal, and the speed is the replies' tokens over their decoding time."""
import json
from pathlib import Path
from types import SimpleNamespace

import helpers.server.engine as engine_module
from helpers.bench.model_choice import main, read_goals
from helpers.world.tasks import instruction, load_tasks, start_app, task_goal

TASKS = {task.id: task for task in load_tasks()}


class Scripted:
    """Answers each goal request with the task's own goal, except for the price task, which it reads as an order."""

    def __init__(self, path=None):
        self.llm = SimpleNamespace(model_path=__file__)

    def prepare(self, request):
        return request

    def run(self, request):
        text = request.messages[-1]["content"].removeprefix("Instruction: ")
        task = next(t for t in TASKS.values() if instruction(t, start_app(t, 0)) == text)
        goal = task_goal(task, start_app(task, 0))
        if task.id == "price":
            goal = {**goal, "order": {"product": "Red mug", "quantity": 1}, "find": []}
        return SimpleNamespace(text=json.dumps(goal), completion_tokens=50, timings={"decode_ms": 500.0})


def test_a_reading_counts_only_when_it_is_the_tasks_goal(monkeypatch):
    monkeypatch.setattr(engine_module, "Engine", Scripted)
    result = read_goals(None, [TASKS["price"], TASKS["order"], TASKS["sign_in"]])
    assert [r["right"] for r in result["readings"]] == [False, True, True]
    assert result["goals_right"] == 2 and result["tasks"] == 3
    assert result["tokens_per_s"] == 100.0  # 150 tokens in 1.5 s of decoding


def test_a_file_the_engine_cannot_serve_is_reported_not_raised(monkeypatch, capsys):
    def no_template(path=None):  # what the engine raises for a base model (helpers.server.engine.chat_template)
        engine_module.chat_template({}, Path(path))

    monkeypatch.setattr(engine_module, "Engine", no_template)
    main(["base-model.gguf"])
    assert "| base-model.gguf | | cannot be served: base-model.gguf has no chat template (tokenizer.chat_template)" \
        in capsys.readouterr().out
