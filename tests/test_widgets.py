"""The notebooks' widgets, without a browser: each shows the frame its slider points at, moves with the slider, and
has a static rendering that holds every frame.

The run and the trace are real ones of the simulated store and of the server's trace format: a governed run of
the scripted policy (no model), and notebook 03's bare loop."""
from __future__ import annotations

import base64
import html
import json

import ipywidgets as widgets
import pytest

from helpers import loop
from helpers.agent import run_episode
from helpers.mask_view import COLOURS, LEGEND, mask_explorer, mask_page
from helpers.widgets.step_through import NO_HARNESS, NO_LEDGER, Frame, frames_from_turns, step_through, steps_html
from helpers.world.scripted_policy import ScriptedPolicy
from helpers.world.tasks import load_tasks

TASKS = {task.id: task for task in load_tasks()}
TRACE = [
    {"token": '{"', "allowed": 1, "top_before_mask": [["The", 0.4]], "top_after_mask": [['{"', 1.0]]},
    {"token": "note", "allowed": 1, "top_before_mask": [], "top_after_mask": [["note", 1.0]]},
    {"token": ' <b>&', "allowed": 47_900, "top_before_mask": [[" <b>&", 0.3], [" A", 0.2]],
     "top_after_mask": [[" <b>&", 0.31], [" A", 0.21]]},
    {"token": "click", "allowed": 24, "top_before_mask": [["go", 0.5]], "top_after_mask": [["click", 0.6], ["go", 0.3]]},
]


def parts(box) -> dict[type, list]:
    """Every widget inside `box`, by type."""
    found: dict[type, list] = {}
    todo = [box]
    while todo:
        widget = todo.pop(0)
        found.setdefault(type(widget), []).append(widget)
        todo += list(getattr(widget, "children", ()))
    return found


@pytest.fixture(scope="module")
def governed():
    task = TASKS["order"]
    return run_episode(loop.ScriptedProposer(ScriptedPolicy(task)), task, 0, "governed")


@pytest.fixture(scope="module")
def bare():
    task = TASKS["price"]
    return loop.run_trajectory(loop.ScriptedProposer(ScriptedPolicy(task)), task)


def test_frames_carry_the_screen_the_step_the_verdict_and_the_ledger_so_far(governed):
    frames = frames_from_turns(governed.turns)
    assert len(frames) == len(governed.turns) > 2
    for frame, turn in zip(frames, governed.turns):
        assert frame.screen_text == turn.screen_text
        assert json.loads(frame.proposed) == turn.step
        assert frame.verdict.startswith("allowed" if turn.decision["allowed"] else "refused")
        assert frame.screenshot_png.startswith(b"\x89PNG")
    order = [e for e in governed.side_effects if e["action"] == "place_order"][0]
    placed = next(n for n, turn in enumerate(governed.turns) if turn.side_effects)
    assert not frames[placed - 1].ledger or all("place_order" not in line for line in frames[placed - 1].ledger)
    assert any(order["detail"] in line and "ran, asked for" in line for line in frames[-1].ledger)


def test_a_click_is_marked_on_the_screenshot_and_nothing_else_changes_it(governed):
    frames = frames_from_turns(governed.turns)
    for frame, turn in zip(frames, governed.turns):
        original = base64.b64decode(turn.screenshot_png_b64)
        clicked = turn.step["tool_call"]["tool_name"] == "click"
        assert (frame.screenshot_png != original) == clicked


def test_without_a_harness_the_frames_say_so(bare):
    frames = frames_from_turns(bare.turns)
    assert {frame.verdict for frame in frames} == {NO_HARNESS}
    assert all(frame.ledger is None for frame in frames)  # none kept, which is not "none happened"
    assert NO_LEDGER in steps_html(frames)


def test_the_step_slider_shows_the_step_it_points_at(governed):
    frames = frames_from_turns(governed.turns)
    found = parts(step_through(frames))
    [slider], [play], [text], [picture] = (found[widgets.IntSlider], found[widgets.Play], found[widgets.HTML],
                                           found[widgets.Image])
    assert (slider.min, slider.max, play.max) == (1, len(frames), len(frames))
    seen = []
    for number in range(len(frames), 0, -1):  # backwards: every value is a change, the first one included
        slider.value = number
        frame = frames[number - 1]
        assert f"step {number} of {len(frames)}" in text.value
        assert html.escape(frame.proposed) in text.value and html.escape(frame.verdict) in text.value
        assert picture.value == frame.screenshot_png
        seen.append(text.value)
    assert len(set(seen)) == len(frames)


def test_the_static_steps_hold_every_frame_and_no_script(governed):
    frames = frames_from_turns(governed.turns)
    page = steps_html(frames)
    for frame in frames:
        assert html.escape(frame.proposed) in page and base64.b64encode(frame.screenshot_png).decode() in page
    assert page.count("<details>") == len(frames)
    assert "<script" not in page and "<style" not in page


def test_a_frame_of_plain_data_needs_no_run():
    frame = Frame(1, "page: home", None, '{"tool_call": {"tool_name": "go_back"}}', "went back",
                  "refused (outside_schema): not on this screen", ["place_order: 1 x Mug (blocked: user_refused)"])
    found = parts(step_through([frame]))
    assert "refused (outside_schema)" in found[widgets.HTML][0].value
    assert "1 x Mug (blocked: user_refused)" in found[widgets.HTML][0].value
    assert widgets.Image not in found


def test_the_mask_slider_shows_the_token_it_points_at_and_who_chose_it():
    found = parts(mask_explorer(TRACE))
    [slider], [text] = found[widgets.IntSlider], found[widgets.HTML]
    assert slider.max == len(TRACE)
    slider.value = 3
    third = text.value
    assert "token 3 of 4" in third and "47,900 tokens" in third and LEGEND["model"] in third
    assert "&#x27; &lt;b&gt;&amp;&#x27;" in third  # the token, escaped, quoted as Python writes it
    assert "click" not in third.split("token 3 of 4")[0]  # the text so far stops at the current token
    slider.value = 1
    assert "token 1 of 4" in text.value and LEGEND["grammar"] in text.value and "allowed 1 token here" in text.value
    assert "&#x27;The&#x27;</code> 0.40" in text.value  # the model wanted prose; the mask allowed one token
    slider.value = 4
    assert "outline" in text.value.split("click")[0].rsplit("<span", 1)[1]  # the current token is outlined


def test_the_static_mask_page_holds_every_token_on_its_colour():
    page = mask_page(TRACE)
    for step in TRACE:
        colour = COLOURS["grammar" if step["allowed"] == 1 else "model"]
        assert f'background:{colour};border-radius:3px;" title="{step["allowed"]:,} allowed">' \
               f'{html.escape(step["token"])}</span>' in page
    assert page.count("<tr>") == len(TRACE) + 1
    assert "<script" not in page and "<style" not in page


def test_a_viewer_without_widgets_reads_one_line_not_the_tree():
    view = mask_explorer(TRACE)
    assert repr(view) == "a slider over 4 tokens (it runs in Jupyter with a live kernel)"
    assert isinstance(view, widgets.VBox)
