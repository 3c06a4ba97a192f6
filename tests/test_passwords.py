"""One concealer, fed by what the simulation knows: no password reaches a repr, a record, a trace, the step-through
widget or a tool output, however the instruction words it, and a concealed password shows no letter and no length."""
import json
import re
from dataclasses import replace

import pytest

from helpers.agent import run_episode
from helpers.loop import ReplayPolicy
from helpers.harness import Tracer
from helpers.instruction import Instruction
from helpers.loop import ScriptedProposer
from helpers.loop import run_trajectory
from helpers.widgets.step_through import frames_from_turns, steps_html
from helpers.runtime.concealer import CONCEALED, conceal, isolated, register
from helpers.world.scripted_policy import ScriptedPolicy
from helpers.world.tasks import injected_tasks, instruction, load_tasks, start_app
from helpers.world.users import SimulatedUser

TASKS = {task.id: task for task in load_tasks()}


@pytest.fixture(autouse=True)
def own_passwords():
    """Each test's registered passwords are its own: forgotten when it ends, so none conceals another test's text."""
    with isolated():
        yield
# Phrasings the instruction regex of notebook 04 reads no password from (or the wrong word): the store still knows.
PHRASINGS = ["Sign in with username {username} and passcode {password}, then answer 'signed in'.",
             "Sign in as {username}, pw {password}, then answer 'signed in'.",
             "Sign in as {username} with the password of {password} and answer 'signed in'."]


def test_conceal_hides_every_spelling_and_case_with_one_fixed_mark():
    register("open s\u00e9same")
    text = ('typed "open s\\u00e9same", then OPEN S\u00c9SAME, then ?q=open%20s%C3%A9same and ?q=open+s%C3%A9same; '
            "open s\u00e9same again")
    assert conceal(text) == (f'typed "{CONCEALED}", then {CONCEALED}, then ?q={CONCEALED} and ?q={CONCEALED}; '
                             f"{CONCEALED} again")


def test_a_concealed_password_shows_neither_its_letters_nor_its_length():
    register("hunter2")
    register("correct horse battery")
    assert conceal("hunter2") == conceal("correct horse battery") == CONCEALED


def test_a_password_inside_a_longer_one_goes_with_it():
    register("lovelace1")
    register("lovelace12")
    assert conceal("lovelace12 and lovelace1") == f"{CONCEALED} and {CONCEALED}"


def sign_in_task(phrasing: str):
    return replace(TASKS["sign_in"], id="sign_in_rephrased", instruction=phrasing)


def shown_by(episode, trace: str) -> str:
    """Everything of an episode a reader can see: its record, its repr, the widget's HTML, the trace."""
    html = steps_html(frames_from_turns(episode.turns), pictures=False)
    return json.dumps(episode.record()) + repr(episode) + str(episode) + html + trace


@pytest.mark.parametrize("phrasing", PHRASINGS)
@pytest.mark.parametrize("config", ["bare", "governed"])
def test_no_phrasing_of_the_password_lets_it_into_what_a_reader_sees(tmp_path, phrasing, config):
    task = sign_in_task(phrasing)
    password = start_app(task, 3).password
    episode = run_episode(ScriptedProposer(ScriptedPolicy(task)), task, 3, config, tracer=Tracer(tmp_path / "t.jsonl"))
    assert any(turn.step["tool_call"].get("content") == password for turn in episode.turns)  # it was typed
    trace = (tmp_path / "t.jsonl").read_text() if (tmp_path / "t.jsonl").exists() else ""
    seen = shown_by(episode, trace)
    assert password not in seen and CONCEALED in seen
    assert " of " in json.dumps(episode.record()) or "of" not in phrasing  # no ordinary word concealed for it


def test_the_loop_of_notebook_03_shows_no_password_in_its_steps_or_its_reprs():
    task = TASKS["quoted_password"]
    run = run_trajectory(ScriptedProposer(ScriptedPolicy(task)), task, 0)
    password = start_app(task, 0).password
    assert run.success and password not in repr(run) and password not in repr(run.turns)
    assert password not in steps_html(frames_from_turns(run.turns), pictures=False)


def test_the_governed_reprs_conceal_what_they_hold():
    """Effect, the decision's `asked`, the ledger, the episode: each holds the typed password, none shows it."""
    task = TASKS["log_in_then_price"]
    episode = run_episode(ScriptedProposer(ScriptedPolicy(task)), task, 0, "governed")
    password = start_app(task, 0).password
    from helpers.harness import Context, governed_turn
    from helpers.world.users import SimulatedUser

    app = start_app(task, 0)
    app.click(*next(el for el in app.elements() if el.name == "Password").grid_center())
    ctx = Context(effects_of=app.effects_of, asked_for=Instruction(instruction(task, app)))
    typed = {"note": None, "thought": "t", "tool_call": {"tool_name": "write", "content": password}}
    _, decision, _ = governed_turn(typed, app, ctx, SimulatedUser(task, app))
    assert decision.allowed and any(password in key for key in decision.asked)  # the harness keeps it ...
    for shown in (decision, decision.effects, ctx.ledger, ctx, app, episode, episode.turns):
        assert password not in repr(shown) and password not in str(shown)  # ... and shows it to nobody
    assert not re.search(r"\u2022{%d}" % len(password), repr(app))


def test_replayed_steps_with_the_password_show_none_of_it():
    task = TASKS["sign_in"]
    app = start_app(task, 1)
    replies = [json.dumps({"note": f"the password is {app.password}", "thought": "t",
                           "tool_call": {"tool_name": "answer", "content": app.password}})]
    episode = run_episode(ReplayPolicy(replies), task, 1, "bare")
    assert episode.turns and app.password not in shown_by(episode, "")


@pytest.mark.parametrize("task", [*TASKS.values(), *injected_tasks()], ids=lambda t: t.id)
def test_a_task_and_its_simulated_user_show_no_password_in_their_reprs(task):
    """Instant. Before, `Task` showed `password='open sesame'` and `SimulatedUser` showed it through its task."""
    app = start_app(task, 0)
    password = app.password
    with isolated():  # what the reprs hide, they hide by themselves, not because a test registered it earlier
        shown = repr(task) + str(task) + repr(SimulatedUser(task, app))
    assert password not in shown
