"""The colours labkit draws with, defined once: Okabe and Ito's colour-blind-safe palette, the
hatching that tells collectives and memory categories apart without colour, the text colour that
reads on a given bar, and the light or dark look of matplotlib figures.

    from labkit.views import palette
    palette.COLLECTIVES["all_gather"], palette.HATCHES["all_gather"]
    palette.text_on("#0072B2")            # "#ffffff": 5.2:1 against the bar, black would be 4.1:1
    with palette.figure_style():          # LABKIT_THEME, else JupyterLab's theme setting, else light
        fig = plt.figure()

Lessons 2 and 4 teach all_gather against reduce_scatter: they are blue and vermillion, which
stay far apart for red-green colour-blind readers too (tests/test_views_palette.py simulates
deuteranopia and protanopia and measures every pair in CIEDE2000).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Okabe & Ito, "Color Universal Design" (2008); black is left out: it vanishes on a dark theme
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}
GREY = "#999999"
LIGHT_GREY = "#CCCCCC"  # not grey #999999: that one is too close to bluish green for a deuteranope

# the four collectives: every pair at least 18 apart (CIEDE2000) under deuteranopia and protanopia
COLLECTIVES = {
    "all_gather": OKABE_ITO["blue"],
    "reduce_scatter": OKABE_ITO["vermillion"],
    "all_reduce": OKABE_ITO["bluish_green"],
    "broadcast": OKABE_ITO["sky_blue"],
}
# what else a timeline draws: compute (no hatching), the units held, host-side work
TIMELINE = {
    "forward": OKABE_ITO["orange"],
    "backward": OKABE_ITO["reddish_purple"],
    "optimizer": GREY,
    **COLLECTIVES,
    "held": OKABE_ITO["yellow"],
    "host": LIGHT_GREY,
}
# memory categories (labkit.wire.records.CATEGORIES): params and their gathered copy in two blues
MEMORY = {
    "params": OKABE_ITO["blue"],
    "params_unsharded": OKABE_ITO["sky_blue"],
    "grads": OKABE_ITO["vermillion"],
    "optimizer": OKABE_ITO["bluish_green"],
    "activations": OKABE_ITO["yellow"],
    "other": LIGHT_GREY,
}
# one line per rank or strategy: the palette in an order where neighbours differ most
SERIES = [
    OKABE_ITO[k] for k in ("blue", "orange", "bluish_green", "vermillion", "reddish_purple", "sky_blue", "yellow")
]
SERIES.append(GREY)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # a line tells itself by its marker too, with SERIES

# hatching, a second cue besides colour: "" is solid. Names are matplotlib's hatch letters.
HATCHES = {
    "all_gather": "/",
    "reduce_scatter": "\\",
    "all_reduce": "x",
    "broadcast": "-",
}
MEMORY_HATCHES = {
    "params": "",
    "params_unsharded": "/",
    "grads": "\\",
    "optimizer": "x",
    "activations": ".",
    "other": "-",
}
MPL_HATCH = {"": None, "/": "///", "\\": "\\\\\\", "x": "xx", "-": "---", ".": ".."}
# the same hatches as SVG paths on a 6 x 6 tile (the diagonals continue across tiles)
SVG_HATCH = {
    "/": "M0,6 L6,0 M-1,1 L1,-1 M5,7 L7,5",
    "\\": "M0,0 L6,6 M-1,5 L1,7 M5,-1 L7,1",
    "x": "M0,6 L6,0 M0,0 L6,6",
    "-": "M0,3 L6,3",
    ".": "M2,3 a1,1 0 1,0 2,0 a1,1 0 1,0 -2,0",
}

BLACK, WHITE = "#000000", "#ffffff"
AA_TEXT = 4.5  # WCAG 2 AA: the least contrast for normal-size text


def rgb(color: str) -> tuple[float, float, float]:
    """``#rrggbb`` (or ``#rgb``) as three values in 0..1."""
    h = color.lstrip("#")
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    return (int(h[0:2], 16) / 255, int(h[2:4], 16) / 255, int(h[4:6], 16) / 255)


def luminance(color: str) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb(color)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours, 1 to 21."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_on(background: str) -> str:
    """Black or white, whichever reads better on ``background`` (one of them is always >= 4.58:1)."""
    return BLACK if contrast(BLACK, background) >= contrast(WHITE, background) else WHITE


def mpl_hatch(name: str) -> str | None:
    return MPL_HATCH[name]


def svg_patterns(colors: dict[str, str], hatches: dict[str, str], prefix: str) -> str:
    """``<defs>`` with one pattern per hatched entry: its colour, crossed by lines in its text colour.

    Each pattern's id is ``{prefix}-{name}``. Ids are global to the page, and a browser may not paint a
    pattern that sits in a hidden output (another notebook's tab): each SVG gets a prefix of its own."""
    tiles = []
    for name, color in colors.items():
        path = SVG_HATCH.get(hatches.get(name, ""))
        if path is None:
            continue
        ink = text_on(color)
        paint = (
            f"fill='{ink}' stroke='none'" if hatches[name] == "." else f"fill='none' stroke='{ink}' stroke-width='1'"
        )
        tiles.append(
            f"<pattern id='{prefix}-{name}' patternUnits='userSpaceOnUse' width='6' height='6'>"
            f"<rect width='6' height='6' fill='{color}'/><path d='{path}' {paint} opacity='0.55'/></pattern>"
        )
    return f"<defs>{''.join(tiles)}</defs>" if tiles else ""


def svg_fill(name: str, colors: dict[str, str], hatches: dict[str, str], prefix: str) -> str:
    """The ``fill`` of a shape in category ``name``: its hatch pattern (with its plain colour where the
    pattern cannot be found), else its plain colour."""
    return f"url(#{prefix}-{name}) {colors[name]}" if hatches.get(name) in SVG_HATCH else colors[name]


# ---------------------------------------------------------------------------------------
# Figures, light or dark
# ---------------------------------------------------------------------------------------

# JupyterLab's own colours (--jp-layout-color0, --jp-ui-font-color1, --jp-border-color1), so that a
# figure sits in the notebook as its outputs do
FIGURE_COLORS = {
    "light": {"background": "#ffffff", "text": "#212121", "lines": "#616161", "grid": "#bdbdbd"},
    "dark": {"background": "#111111", "text": "#e0e0e0", "lines": "#9e9e9e", "grid": "#616161"},
}
THEME_SETTINGS = os.path.join("@jupyterlab", "apputils-extension", "themes.jupyterlab-settings")


def theme() -> str:
    """``"dark"`` or ``"light"``: ``LABKIT_THEME``, else JupyterLab's theme setting, else light.

    JupyterLab keeps the theme the user picked in its user settings; the kernel runs beside the
    server (one machine, one environment), so it can read them. It cannot know a theme that
    follows the system (``adaptive-theme``) nor one chosen in another browser's local storage:
    then the figure is light, as matplotlib's default is."""
    from labkit.wire import env as envvars

    chosen = (envvars.get("LABKIT_THEME") or "").strip().lower()
    if chosen in FIGURE_COLORS:
        return chosen
    return jupyterlab_theme() or "light"


def jupyterlab_theme() -> str | None:
    """``"dark"``/``"light"`` from JupyterLab's saved theme setting, None when there is none to read."""
    path = os.path.join(settings_dir(), THEME_SETTINGS)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    # the file is JSON5 (comments allowed): read the two keys that matter rather than parse it all
    if re.search(r'"adaptive-theme"\s*:\s*true', text):
        return None
    m = re.search(r'"theme"\s*:\s*("(?:[^"\\]|\\.)*")', text)
    if not m:
        return None
    name = json.loads(m.group(1))
    return "dark" if "dark" in name.lower() else "light"


def settings_dir() -> str:
    """JupyterLab's user settings folder: ``JUPYTERLAB_SETTINGS_DIR``, else ``lab/user-settings`` in
    Jupyter's config folder (``JUPYTER_CONFIG_DIR``, else ``~/.jupyter``), as jupyter_core finds it."""
    given = os.environ.get("JUPYTERLAB_SETTINGS_DIR")  # JupyterLab's variables, not labkit's
    if given:
        return given
    config = os.environ.get("JUPYTER_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".jupyter")
    return os.path.join(config, "lab", "user-settings")


def figure_rc(name: str | None = None) -> dict[str, Any]:
    """matplotlib rc settings for the ``light`` or ``dark`` look (default: :func:`theme`)."""
    from matplotlib import cycler  # matplotlib's own (it validates), not the cycler package itself

    c = FIGURE_COLORS[name or theme()]
    return {
        "figure.facecolor": c["background"],
        "figure.edgecolor": c["background"],
        "savefig.facecolor": c["background"],
        "savefig.edgecolor": c["background"],
        "axes.facecolor": c["background"],
        "axes.edgecolor": c["lines"],
        "axes.labelcolor": c["text"],
        "axes.titlecolor": c["text"],
        "text.color": c["text"],
        "xtick.color": c["lines"],
        "ytick.color": c["lines"],
        "xtick.labelcolor": c["text"],
        "ytick.labelcolor": c["text"],
        "grid.color": c["grid"],
        "legend.facecolor": c["background"],
        "legend.edgecolor": c["grid"],
        "legend.labelcolor": c["text"],
        "hatch.linewidth": 0.6,
        "axes.prop_cycle": cycler(color=SERIES),
    }


@contextmanager
def figure_style(name: str | None = None) -> Iterator[str]:
    """Draw inside: the figures made here get the theme's look. Yields the theme's name."""
    import matplotlib

    chosen = name or theme()
    with matplotlib.rc_context(figure_rc(chosen)):
        yield chosen
