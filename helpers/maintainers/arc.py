"""The arc of the workshop as one slide: `python -m helpers.maintainers.arc` draws it into docs/arc.png.

Left, Layer 2: a model reply climbs the repair ladder (parse, validate, repair once, fall back) until it is one
typed intent. Right, the harness: its checks, the user's approval, execution and the ledger; a refusal or a result
goes back to the model as its next observation. Each box names the notebooks that teach it. The slide is 16:9 with
large text, for a screen at the front of a room.

Every word is drawn as the outline of its glyphs: matplotlib's text layout changes between releases (3.10 and 3.11
place the same string a few pixels apart), its outlines do not, so the committed picture stays the one this code
draws on any release a reader has. The PNG carries no version in its metadata, so the same release writes the same
bytes. tests/test_arc.py compares the committed picture with a fresh drawing, pixel by pixel.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.style
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, PathPatch
from matplotlib.textpath import TextPath
from matplotlib.transforms import Affine2D

from helpers.runtime.paths import ROOT

PICTURE = ROOT / "docs" / "arc.png"
WIDTH, HEIGHT, DPI = 16, 9, 100  # the axes run in inches: 1600 x 900 pixels, a 16:9 slide
FONT = "DejaVu Sans"  # shipped inside matplotlib, so every machine has the same glyphs
POINTS = 72  # points in an inch: a font size in points, divided by this, is a height on the axes

LAYER2, HARNESS, USER = ("#dbeafe", "#1e40af"), ("#ffedd5", "#9a3412"), ("#dcfce7", "#166534")
INK, MUTED = "#111827", "#4b5563"
LINE = 2.5

# Both columns share these rows, top to bottom: one box each.
ROWS = (6.7, 5.35, 4.0, 2.65, 1.3)
BOX_HEIGHT = 1.05
LEFT_X, LEFT_WIDTH = 1.25, 5.3
RIGHT_X, RIGHT_WIDTH = 9.45, 6.0
BUS_X = 7.9  # where the ladder's exits gather on their way to the harness
LOOP_X, LOOP_Y = 15.8, 7.5  # the way back to the model: around the harness, then over both columns


@dataclass(frozen=True)
class Box:
    title: str
    detail: str
    notebooks: str
    colours: tuple[str, str]


LADDER = (
    Box("model reply", "prompt-only, or guided by a schema", "00 02 05", LAYER2),
    Box("1  parse", "find the JSON object in the text", "01", LAYER2),
    Box("2  validate", "name every problem, all at once", "01 02", LAYER2),
    Box("3  repair once", "send the errors back to the model", "04", LAYER2),
    Box("4  fall back", "a fixed object that keeps the contract", "01 04", LAYER2),
)
GOVERNED = (
    Box("one typed intent", "answer, tool call, ask, plan or abort", "02 04", HARNESS),
    Box("the harness's checks", "declared tool, arguments, policy, asked for", "04 06", HARNESS),
    Box("the user approves", "what cannot be undone, in the app's words", "04 06", USER),
    Box("execute", "the app acts; the result goes back", "03 06", HARNESS),
    Box("the ledger", "every effect recorded, never repeated", "04 06", HARNESS),
)


def write(ax: Axes, x: float, y: float, text: str, size: float, colour: str, *, bold: bool = False,
          italic: bool = False, ha: str = "left") -> None:
    """`text` as glyph outlines, its capitals centred on `y`, aligned on `x` as `ha` (left, center, right) says."""
    font = FontProperties(family=FONT, weight="bold" if bold else "normal", style="italic" if italic else "normal")
    outline = TextPath((0, 0), text, size=size / POINTS, prop=font)
    left, right = outline.vertices[:, 0].min(), outline.vertices[:, 0].max()  # near enough, and far cheaper
    start = {"left": left, "center": (left + right) / 2, "right": right}[ha]
    baseline = y - 0.36 * size / POINTS  # DejaVu's capitals are 0.73 em tall: their middle sits on `y`
    placed = Affine2D().translate(x - start, baseline).transform_path(outline)
    # add_artist, not add_patch: the axes' limits are fixed, and measuring every glyph's curves for them is slow.
    ax.add_artist(PathPatch(placed, facecolor=colour, edgecolor="none"))


def label(ax: Axes, x: float, y: float, text: str, colour: str = MUTED, ha: str = "center") -> None:
    write(ax, x, y, text, 16, colour, italic=True, ha=ha)


def box(ax: Axes, x: float, y: float, width: float, content: Box) -> None:
    fill, edge = content.colours
    ax.add_patch(FancyBboxPatch((x, y - BOX_HEIGHT / 2), width, BOX_HEIGHT, boxstyle="round,pad=0,rounding_size=0.18",
                                facecolor=fill, edgecolor=edge, linewidth=LINE))
    write(ax, x + 0.25, y + 0.19, content.title, 23, INK, bold=True)
    write(ax, x + 0.25, y - 0.24, content.detail, 16, MUTED)
    write(ax, x + width - 0.2, y + 0.19, content.notebooks, 15, edge, ha="right")


def arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], colour: str = INK, bend: float = 0.0,
          dashed: bool = False) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=26, linewidth=LINE, color=colour,
                                 connectionstyle=f"arc3,rad={bend}", linestyle="--" if dashed else "-",
                                 shrinkA=0, shrinkB=0))


def line(ax: Axes, xs: Sequence[float], ys: Sequence[float], colour: str = INK, dashed: bool = False) -> None:
    ax.plot(xs, ys, color=colour, linewidth=LINE, linestyle="--" if dashed else "-", solid_capstyle="butt")


def draw() -> Figure:
    """The slide, as a matplotlib Figure; pyplot is never touched, so a notebook's backend stays as it was."""
    with matplotlib.style.context("default"):  # the reader's own rcParams must not change the picture
        fig = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI, facecolor="white")
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, WIDTH)
        ax.set_ylim(0, HEIGHT)
        ax.axis("off")
        write(ax, WIDTH / 2, 8.62, "The model proposes; the harness disposes", 32, INK, bold=True, ha="center")
        write(ax, LEFT_X, 8.1, "Layer 2: the reply becomes one typed intent", 19, LAYER2[1], bold=True)
        write(ax, RIGHT_X, 8.1, "The harness decides what runs", 19, HARNESS[1], bold=True)
        for y, content in zip(ROWS, LADDER):
            box(ax, LEFT_X, y, LEFT_WIDTH, content)
        for y, content in zip(ROWS, GOVERNED):
            box(ax, RIGHT_X, y, RIGHT_WIDTH, content)
        gap = BOX_HEIGHT / 2

        # Down the ladder: each rung hands on what it could not settle.
        middle = LEFT_X + LEFT_WIDTH / 2
        for upper, lower in zip(ROWS, ROWS[1:]):
            arrow(ax, (middle, upper - gap), (middle, lower + gap))
        label(ax, middle + 0.85, (ROWS[1] + ROWS[2]) / 2, "an object")
        label(ax, middle + 0.85, (ROWS[2] + ROWS[3]) / 2, "problems")
        label(ax, middle + 0.95, (ROWS[3] + ROWS[4]) / 2, "still invalid")
        # A reply with no object in it has nothing to validate: it goes straight to the repair.
        arrow(ax, (LEFT_X, ROWS[1]), (LEFT_X, ROWS[3]), bend=0.75)
        label(ax, LEFT_X - 0.45, (ROWS[1] + ROWS[3]) / 2 + 0.15, "no")
        label(ax, LEFT_X - 0.45, (ROWS[1] + ROWS[3]) / 2 - 0.15, "object")

        # Out of the ladder: the first rung that gives a valid object hands it to the harness.
        ladder_edge = LEFT_X + LEFT_WIDTH
        for row, said in ((ROWS[2], "valid"), (ROWS[3], "repaired"), (ROWS[4], "fallback")):
            line(ax, [ladder_edge, BUS_X], [row, row])
            label(ax, (ladder_edge + BUS_X) / 2, row + 0.22, said)
        line(ax, [BUS_X, BUS_X], [ROWS[4], ROWS[0]])
        arrow(ax, (BUS_X, ROWS[0]), (RIGHT_X, ROWS[0]))

        # Down the harness: its checks, the user, execution, the ledger.
        centre = RIGHT_X + RIGHT_WIDTH / 2
        for upper, lower in zip(ROWS, ROWS[1:]):
            arrow(ax, (centre, upper - gap), (centre, lower + gap), colour=HARNESS[1])
        label(ax, centre + 1.35, (ROWS[1] + ROWS[2]) / 2, "cannot be undone")
        label(ax, centre + 0.8, (ROWS[2] + ROWS[3]) / 2, "approved")

        # A refusal, or the tool's result, is what the model reads next turn.
        harness_edge = RIGHT_X + RIGHT_WIDTH
        for row, said in ((ROWS[1], "refused"), (ROWS[3], "result")):
            line(ax, [harness_edge, LOOP_X], [row, row], HARNESS[1], dashed=True)
            label(ax, harness_edge - 0.1, row + gap + 0.2, said, HARNESS[1], ha="right")
        line(ax, [LOOP_X, LOOP_X, middle], [ROWS[3], LOOP_Y, LOOP_Y], HARNESS[1], dashed=True)
        arrow(ax, (middle, LOOP_Y), (middle, ROWS[0] + gap), colour=HARNESS[1], dashed=True)
        label(ax, (BUS_X + RIGHT_X) / 2, LOOP_Y + 0.22, "the model's next observation", HARNESS[1])
        write(ax, WIDTH / 2, 0.3, "Numbers: the notebooks that teach each step.", 16, MUTED, ha="center")
    return fig


def save(fig: Figure, path: Path) -> None:
    """Write the PNG with no software version in its metadata, so that it does not change with each release."""
    fig.savefig(path, dpi=DPI, metadata={"Software": None})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.maintainers.arc", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PICTURE, help=f"where to write the PNG (default: {PICTURE})")
    args = parser.parse_args(argv)
    save(draw(), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
