"""docs/slides.md is what `python -m helpers.maintainers.slides` makes of the committed notebooks (issue 49): a
notebook executed again and the slides not made again would show the room outputs it no longer sees. Instant."""
from __future__ import annotations

import json

from helpers.maintainers import slides

MAKE_AGAIN = "run `./workshop run helpers.maintainers.slides` and commit docs/slides.md and docs/slides/"


def test_the_committed_slides_are_the_ones_the_notebooks_make():
    markdown, pictures = slides.make()
    assert slides.SLIDES.read_text(encoding="utf-8") == markdown, MAKE_AGAIN
    assert sorted(p.name for p in slides.PICTURES.glob("*.png")) == sorted(pictures), MAKE_AGAIN
    assert all((slides.PICTURES / name).read_bytes() == data for name, data in pictures.items()), MAKE_AGAIN


def test_every_notebook_shows_the_room_at_least_one_of_its_outputs():
    for path in sorted(slides.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        shown = [c for c in cells if any(t.startswith(slides.TAG) for t in c.get("metadata", {}).get("tags", []))
                 and c.get("outputs")]
        assert shown, f"{path.name}: tag a cell whose output the room sees `slide:TITLE`"


def test_a_picture_a_table_and_text_each_become_slide_matter():
    cell = {"outputs": [{"output_type": "stream", "name": "stdout", "text": ["a\n"] * 30},
                        {"output_type": "display_data", "data": {"text/markdown": ["| a |\n|---|\n| 1 |"]}},
                        {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo="}}]}
    pictures = {}
    blocks = slides.output_blocks(cell, "05-9", pictures)
    assert blocks[0].startswith("```\na\n") and blocks[0].endswith("a\n...\n```")
    assert blocks[1] == "| a |\n|---|\n| 1 |" and blocks[2] == "![05-9](slides/05-9-2.png)"
    assert list(pictures) == ["05-9-2.png"]


def test_every_slide_tag_is_one_nbformat_accepts():
    """nbformat refuses a tag with a comma (its schema: ^[^,]+$), and nbconvert then executes nothing."""
    for path in sorted(slides.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        tags = [tag for cell in cells for tag in cell.get("metadata", {}).get("tags", [])]
        assert not [t for t in tags if "," in t], path.name
