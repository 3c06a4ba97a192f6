"""Each notebook's core runs its own step of the arc, live: a class that reads only the Core sections still runs what
the notebook is named for.

For every notebook, the calls its core must make (on the model, where the step is a model's) and the arc step each
shows, as a pattern of the code that makes it. The committed notebook is the evidence: a matching code cell must
stand under a section marked *Core*, and must have run when the notebook was executed on the embedded model (its
timing metadata and an output). Reading the executed notebook keeps this test free of the model.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_reading_time import mark, run_seconds  # pytest puts tests/ on the path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {path.name[:2]: path for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
MODEL_CALL = r"completions\.create\(|ModelPolicy\(|model_repair\(|\bask\(conn"

# notebook -> (the arc step it shows, a pattern of the core code that shows it)
ARC: dict[str, list[tuple[str, str]]] = {
    "00": [("a prompt-only call to the model", r"completions\.create\((?:(?!guided)[^\n])*\)\n"),
           ("the same call guided by a schema", r"completions\.create\([^#]*guided\("),
           ("the probe of which dialects the server enforces", r"\bprobe\(")],
    "01": [("a real prompt-only reply of the model", MODEL_CALL),
           ("where a naive parser breaks", r"naive_parse_json_object\("),
           ("the robust parser on the reply", r"parse_json_object\("),
           ("every problem named by the validator", r"validate_answer\("),
           ("the fallback", r"format_error\(")],
    "02": [("the contract in Pydantic", r"class Answer\("),
           ("notebook 01's question asked live, its reply validated by 01's validator and by Pydantic in one call",
            r"\bask\(conn.*validate_answer\(parse_json_object\(.*Answer\.model_validate_json\("),
           ("the Step union", r"class Step\("),
           ("the schema exactly as the model receives it", r"profile\.guided\("),
           ("one live guided step", MODEL_CALL),
           ("parsed into a Step", r"Step\.model_validate_json\("),
           ("dispatched", r"\bdispatch\(")],
    "03": [("the observation", r"observation_message\("),
           ("one turn: validate, run, record", r"def apply_step\((?:(?!\ndef ).)*dispatch\("),
           ("the loop's request: the model, guided, asked for the next step",
            r"def propose\((?:(?!\ndef ).)*completions\.create\([^#]*guided\("),
           ("the loop written in the core, each turn through apply_step",
            r"def run_trajectory\((?:(?!\ndef ).)*apply_step\(propose\("),
           ("that loop run on the model, to its end", r"(?<![.\w])run_trajectory\(propose\b"),
           ("trimming, visible in the messages", r"trim_to_last_n_images\(|evict_screen_text\(")],
    "04": [("the ladder on a live reply", r"\bask\(conn\b.*\bclimb\(reply\.text"),
           ("one repair call quoting the validator's errors", r"\bclimb\([^#\n]*model_repair\("),
           ("the harness deciding on what the ladder delivered", r"\bsettle\([^#\n]*\brecord\b"),
           ("the step ladder, its fallback an abort", r"\bclimb\([^#\n]*STEP_CONTRACT"),
           ("what the step ladder delivered, through the harness's pass", r"governed_turn\([^#\n]*\.data"),
           ("an order that goes to the user", r"\bturn\(step\(PLACE")],
    "05": [("prompt-only beside NIM's nvext.guided_json, live", r'"prompt_only".*"guided_nvext".*run_grid\('),
           ("the other guided spellings and 04's ladder, live",
            r'"guided_structured_outputs".*"guided_response_format".*"prompt_only\+ladder".*run_grid\('),
           ("two phases, live", r'"two_phase".*run_grid\('),
           ("inside the mask, on the model", r"mask_trace\(conn")],
    "06": [("governed episodes of the model, live, over several seeds",
            r"for seed in (?:progress\()?range\([^#]*run_episode\([^#]*ModelPolicy\([^#]*governed|"
            r"run_episode\([^#]*ModelPolicy\([^#]*governed[^#]*for seed in (?:progress\()?range\("),
           ("the model's proposals beside what the user and the harness made of them", r"\bproposals\("),
           ("the learner's replies through the harness, the learner's user asked", r"\bplay\([^#]*CarefulUser"),
           ("the ledger", r"ledger|side_effects"),
           ("the comparison with the saved runs", r"headlines\(")],
}


@dataclass
class CodeCell:
    index: int
    source: str
    core: bool | None
    ran: bool  # it has the timing metadata of the execution
    shown: bool = True  # it printed or displayed something



def code_cells(path: Path) -> list[CodeCell]:
    """Every code cell with the mark of the section it stands in and whether it ran when the notebook was executed."""
    found, core = [], True  # above the first `##`: the title and the list of what the notebook teaches
    for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            lines = text.splitlines()
            for number, line in enumerate(lines):
                if line.startswith("## "):
                    core = mark(lines[number + 1:])
            continue
        found.append(CodeCell(index, text, core, run_seconds(cell) is not None, bool(cell.get("outputs"))))
    return found


def shown_in_core(cells: list[CodeCell], pattern: str) -> list[int]:
    """The core cells that ran the code `pattern` matches; a call to the model must also have shown its result."""
    live = re.compile(MODEL_CALL)
    return [cell.index for cell in cells if cell.core and cell.ran and re.search(pattern, cell.source, re.DOTALL)
            and (cell.shown or not live.search(cell.source))]


CASES = [(number, step, pattern) for number, steps in ARC.items() for step, pattern in steps]


def test_every_notebook_of_the_arc_is_listed():
    assert sorted(ARC) == sorted(NOTEBOOKS)


@pytest.mark.parametrize("number,step,pattern", CASES, ids=[f"{n}: {s}" for n, s, _ in CASES])
def test_the_core_runs_its_step_of_the_arc(number, step, pattern):
    assert shown_in_core(code_cells(NOTEBOOKS[number]), pattern), \
        f"notebook {number}'s core must run {step}, in a Core section, executed"


def test_a_step_that_only_going_further_runs_is_not_the_core():
    """The check itself: the same cell counts under *Core*, not under *Going further*, and not when it never ran."""
    cells = [CodeCell(1, "reply = conn.client.chat.completions.create(**conn.profile.prompt_only())", True, True)]
    assert shown_in_core(cells, MODEL_CALL) == [1]
    cells[0].core = False
    assert shown_in_core(cells, MODEL_CALL) == []
    cells[0].core, cells[0].ran = True, False
    assert shown_in_core(cells, MODEL_CALL) == []
    cells[0].ran, cells[0].shown = True, False  # a model call whose reply nobody saw
    assert shown_in_core(cells, MODEL_CALL) == []
