"""The slider every view shares: a Play button and an IntSlider over pages 1..N, an HTML pane and an optional
picture, redrawn whenever the slider moves.

Only what ipywidgets 7.7 (Colab) and 8 (JupyterLab) both have: `jslink` keeps Play and the slider together in the
browser, `observe` redraws in the kernel.
"""
from __future__ import annotations

from functools import cache
from typing import Callable

# A page: its HTML, and a PNG picture or None.
Page = tuple[str, "bytes | None"]


@cache
def view_class():
    """A VBox that names itself in one line: a viewer that cannot run widgets (GitHub) shows this, not the whole
    tree of children and their HTML."""
    import ipywidgets as widgets

    class SliderView(widgets.VBox):
        def __repr__(self) -> str:
            return f"a slider over {self.pages} {self.label}s (it runs in Jupyter with a live kernel)"

    return SliderView


def slider_view(count: int, page: Callable[[int], Page], label: str, pictures: bool = False,
                picture_width: int = 480):
    """A VBox: Play and an IntSlider over 1..count, then `page(n)`'s picture (with `pictures`) beside its HTML."""
    import ipywidgets as widgets

    if count < 1:
        return widgets.HTML("<i>nothing to show</i>")
    slider = widgets.IntSlider(value=1, min=1, max=count, step=1, description=label, continuous_update=True)
    play = widgets.Play(value=1, min=1, max=count, step=1, interval=900, description="play")
    widgets.jslink((play, "value"), (slider, "value"))
    text = widgets.HTML()
    picture = widgets.Image(format="png", width=picture_width)

    def show(change=None) -> None:
        html, png = page(slider.value)
        text.value = html
        picture.value = png or b""
        picture.layout.display = None if png else "none"

    slider.observe(show, names="value")
    show()
    body = widgets.HBox([picture, text]) if pictures else text
    view = view_class()([widgets.HBox([play, slider]), body])
    view.pages, view.label = count, label
    return view
