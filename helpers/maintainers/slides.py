"""The instructor's slides, made from the notebooks: `./workshop run helpers.maintainers.slides` writes docs/slides.md.

One title slide with the arc, then per notebook a slide of what it teaches (its title and its "You will be able
to" list) and one for each output the room will see, taken from the committed, executed notebook: each code cell
tagged `slide:TITLE` gives a slide with that title and the cell's output, its text as text, its chart as a picture
(written to docs/slides/), its Markdown table as a table. Slides are separated by lines of three dashes, as Marp
and most Markdown slide tools read them; on GitHub the page reads top to bottom. What to say over each:
docs/facilitator.md.

The slides are made, not written: when a notebook is executed again, run this again. tests/test_slides.py checks
that the committed slides are the ones the committed notebooks make.
"""
from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from helpers.runtime.paths import ROOT
from helpers.runtime.progress import said_by_progress

NOTEBOOKS = ROOT / "notebooks"
SLIDES = ROOT / "docs" / "slides.md"
PICTURES = ROOT / "docs" / "slides"
TAG = "slide:"
LONGEST_TEXT = 22  # lines of an output that fit on a slide; a longer one is cut, and says so
ABLE = re.compile(r"\*\*You will be able to:\*\*\n((?:- .*\n?(?:  .*\n?)*)+)")


def source(cell: dict) -> str:
    return "".join(cell["source"])


def title_slide() -> str:
    return ("<!-- Made by `./workshop run helpers.maintainers.slides` from the executed notebooks: do not edit, run it "
            "again. What to say over each slide: docs/facilitator.md. -->\n\n# Structured outputs for LLM agents\n\n"
            "The model proposes; the harness disposes.\n\n![The arc of the workshop: the repair ladder, then the "
            "harness](arc.png)")


def opening_slide(notebook: dict) -> str:
    """The notebook's title and what the room will be able to do after it."""
    opening = source(notebook["cells"][0])
    title = next(line for line in opening.splitlines() if line.startswith("# "))
    able = ABLE.search(opening + "\n")
    return f"{title}\n\n" + (able.group(1).strip() if able else "")


def output_blocks(cell: dict, stem: str, pictures: dict[str, bytes]) -> list[str]:
    """A cell's outputs as slide text: a Markdown table as it is, a picture as a file, printed text as a block."""
    blocks = []
    for number, output in enumerate(cell.get("outputs", [])):
        data = output.get("data", {})
        if "image/png" in data:
            name = f"{stem}-{number}.png"
            pictures[name] = base64.b64decode("".join(data["image/png"]))
            blocks.append(f"![{stem}](slides/{name})")
        elif "text/markdown" in data:
            blocks.append("".join(data["text/markdown"]).strip())
        elif output.get("output_type") == "stream" and output.get("name") == "stdout":
            lines = [line for line in "".join(output["text"]).rstrip().splitlines() if not said_by_progress(line)]
            if not lines:
                continue
            cut = ["..."] if len(lines) > LONGEST_TEXT else []
            blocks.append("```\n" + "\n".join([*lines[:LONGEST_TEXT], *cut]) + "\n```")
    return blocks


def notebook_slides(path: Path, pictures: dict[str, bytes]) -> list[str]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    slides = [opening_slide(notebook)]
    for index, cell in enumerate(notebook["cells"]):
        tags = [t for t in cell.get("metadata", {}).get("tags", []) if t.startswith(TAG)]
        if cell["cell_type"] == "code" and tags:
            blocks = output_blocks(cell, f"{path.name[:2]}-{index}", pictures)
            slides.append(f"## {path.name[:2]} · {tags[0][len(TAG):]}\n\n" + "\n\n".join(blocks))
    return slides


def make() -> tuple[str, dict[str, bytes]]:
    """The slides' Markdown and the pictures it shows, by file name."""
    pictures: dict[str, bytes] = {}
    slides = [title_slide()]
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        slides += notebook_slides(path, pictures)
    return "\n\n---\n\n".join(slides) + "\n", pictures


def write(markdown: str, pictures: dict[str, bytes], slides: Path = SLIDES, folder: Path = PICTURES) -> None:
    slides.write_text(markdown, encoding="utf-8")
    folder.mkdir(exist_ok=True)
    for stale in set(p.name for p in folder.glob("*.png")) - set(pictures):
        (folder / stale).unlink()
    for name, data in pictures.items():
        (folder / name).write_bytes(data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.maintainers.slides", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    markdown, pictures = make()
    write(markdown, pictures)
    print(f"wrote {SLIDES.relative_to(ROOT)}: {markdown.count(chr(10) + '---' + chr(10)) + 1} slides, "
          f"{len(pictures)} pictures in {PICTURES.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
