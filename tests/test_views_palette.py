"""Readable for everyone: labkit's colours stay apart for colour-blind readers, its text has WCAG AA
contrast (4.5:1) on what it is drawn on, in JupyterLab's light and dark themes, and its SVGs speak.

Colour blindness is simulated with Machado, Oliveira and Fernandes (2009) at severity 1.0 (full
deuteranopia and protanopia), in linear sRGB; colours are compared in CIEDE2000, itself checked
against the test pairs of Sharma, Wu and Dalal (2005).
"""

from __future__ import annotations

import itertools
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from labkit.grading.checks import CheckResult
from labkit.views import dashboard, palette
from labkit.views import memory as memory_view

MIN_DELTA_E = 15.0

# Machado et al. 2009, Table 1 at severity 1.0, applied to linear RGB
PROTANOPIA = np.array(
    [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
)
DEUTERANOPIA = np.array(
    [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
)
VISIONS = {"typical": np.eye(3), "deuteranopia": DEUTERANOPIA, "protanopia": PROTANOPIA}
SRGB_TO_XYZ = np.array(
    [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750], [0.0193339, 0.1191920, 0.9503041]]
)
D65 = SRGB_TO_XYZ @ np.ones(3)


def linear(c: np.ndarray) -> np.ndarray:
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def encoded(c: np.ndarray) -> np.ndarray:
    c = np.clip(c, 0.0, 1.0)
    return np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055)


def simulate(color: str, matrix: np.ndarray) -> np.ndarray:
    """The sRGB colour (0..1) that a viewer with this deficiency sees for ``color``."""
    return encoded(matrix @ linear(np.array(palette.rgb(color))))


def lab(srgb: np.ndarray) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB colour in 0..1."""
    xyz = (SRGB_TO_XYZ @ linear(srgb)) / D65
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return (116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2]))


def _hue(b: float, a: float) -> float:
    return 0.0 if a == 0 and b == 0 else float(np.degrees(np.arctan2(b, a)) % 360)


def delta_e2000(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """CIEDE2000 colour difference (kL = kC = kH = 1), as Sharma et al. 2005 write it out."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_mean = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(c_mean**7 / (c_mean**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p, h2p = _hue(b1, a1p), _hue(b2, a2p)
    dhp = 0.0 if c1p * c2p == 0 else (h2p - h1p + 180) % 360 - 180
    d_l, d_c = l2 - l1, c2p - c1p
    d_h = 2 * np.sqrt(c1p * c2p) * np.sin(np.radians(dhp / 2))
    l_mean, cp_mean = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        hp_mean = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        hp_mean = (h1p + h2p) / 2
    else:
        hp_mean = (h1p + h2p + (360 if h1p + h2p < 360 else -360)) / 2
    t = (
        1
        - 0.17 * np.cos(np.radians(hp_mean - 30))
        + 0.24 * np.cos(np.radians(2 * hp_mean))
        + 0.32 * np.cos(np.radians(3 * hp_mean + 6))
        - 0.20 * np.cos(np.radians(4 * hp_mean - 63))
    )
    d_theta = 30 * np.exp(-(((hp_mean - 275) / 25) ** 2))
    r_c = 2 * np.sqrt(cp_mean**7 / (cp_mean**7 + 25**7))
    s_l = 1 + 0.015 * (l_mean - 50) ** 2 / np.sqrt(20 + (l_mean - 50) ** 2)
    s_c, s_h = 1 + 0.045 * cp_mean, 1 + 0.015 * cp_mean * t
    r_t = -np.sin(np.radians(2 * d_theta)) * r_c
    return float(np.sqrt((d_l / s_l) ** 2 + (d_c / s_c) ** 2 + (d_h / s_h) ** 2 + r_t * (d_c / s_c) * (d_h / s_h)))


# Sharma, Wu and Dalal 2005, Table 1: (L1, a1, b1), (L2, a2, b2), ΔE00
SHARMA = [
    ((50.0000, 2.6772, -79.7751), (50.0000, 0.0000, -82.7485), 2.0425),
    ((50.0000, 3.1571, -77.2803), (50.0000, 0.0000, -82.7485), 2.8615),
    ((50.0000, 2.8361, -74.0200), (50.0000, 0.0000, -82.7485), 3.4412),
    ((50.0000, -1.3802, -84.2814), (50.0000, 0.0000, -82.7485), 1.0000),
    ((50.0000, -1.1848, -84.8006), (50.0000, 0.0000, -82.7485), 1.0000),
    ((50.0000, -0.9009, -85.5211), (50.0000, 0.0000, -82.7485), 1.0000),
    ((50.0000, 0.0000, 0.0000), (50.0000, -1.0000, 2.0000), 2.3669),
    ((50.0000, -1.0000, 2.0000), (50.0000, 0.0000, 0.0000), 2.3669),
    ((50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0009), 7.1792),
    ((50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0010), 7.1792),
    ((50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0011), 7.2195),
    ((50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0012), 7.2195),
    ((50.0000, -0.0010, 2.4900), (50.0000, 0.0009, -2.4900), 4.8045),
    ((50.0000, -0.0010, 2.4900), (50.0000, 0.0010, -2.4900), 4.8045),
    ((50.0000, -0.0010, 2.4900), (50.0000, 0.0011, -2.4900), 4.7461),
    ((50.0000, 2.5000, 0.0000), (50.0000, 0.0000, -2.5000), 4.3065),
    ((50.0000, 2.5000, 0.0000), (73.0000, 25.0000, -18.0000), 27.1492),
    ((50.0000, 2.5000, 0.0000), (61.0000, -5.0000, 29.0000), 22.8977),
    ((50.0000, 2.5000, 0.0000), (56.0000, -27.0000, -3.0000), 31.9030),
    ((50.0000, 2.5000, 0.0000), (58.0000, 24.0000, 15.0000), 19.4535),
    ((50.0000, 2.5000, 0.0000), (50.0000, 3.1736, 0.5854), 1.0000),
    ((50.0000, 2.5000, 0.0000), (50.0000, 3.2972, 0.0000), 1.0000),
    ((50.0000, 2.5000, 0.0000), (50.0000, 1.8634, 0.5757), 1.0000),
    ((50.0000, 2.5000, 0.0000), (50.0000, 3.2592, 0.3350), 1.0000),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((63.0109, -31.0961, -5.8663), (62.8187, -29.7946, -4.0864), 1.2630),
    ((61.2901, 3.7196, -5.3901), (61.4292, 2.2480, -4.9620), 1.8731),
    ((35.0831, -44.1164, 3.7933), (35.0232, -40.0716, 1.5901), 1.8645),
    ((22.7233, 20.0904, -46.6940), (23.0331, 14.9730, -42.5619), 2.0373),
    ((36.4612, 47.8580, 18.3852), (36.2715, 50.5065, 21.2231), 1.4146),
    ((90.8027, -2.0831, 1.4410), (91.1528, -1.6435, 0.0447), 1.4441),
    ((90.9257, -0.5406, -0.9208), (88.6381, -0.8985, -0.7239), 1.5381),
    ((6.7747, -0.2908, -2.4247), (5.8714, -0.0985, -2.2286), 0.6377),
    ((2.0776, 0.0795, -1.1350), (0.9033, -0.0636, -0.5514), 0.9082),
]


@pytest.mark.parametrize("lab1, lab2, expected", SHARMA)
def test_ciede2000_matches_sharmas_test_pairs(lab1, lab2, expected):
    assert delta_e2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)
    assert delta_e2000(lab2, lab1) == pytest.approx(expected, abs=1e-4)  # symmetric


def test_the_simulation_keeps_greys_and_merges_red_with_green():
    for vision in VISIONS.values():  # each row of Machado's matrices sums to 1: a grey stays the grey it was
        for grey in ("#000000", "#777777", "#ffffff"):
            assert simulate(grey, vision) == pytest.approx(np.array(palette.rgb(grey)), abs=2e-3)
    # matplotlib's old all_gather green and reduce_scatter red: apart for most, close for the colour-blind
    green, red = "#55a868", "#c44e52"
    seen = {name: delta_e2000(lab(simulate(green, m)), lab(simulate(red, m))) for name, m in VISIONS.items()}
    assert seen["typical"] > 40 and seen["deuteranopia"] < MIN_DELTA_E and seen["protanopia"] < 25


def closest_pair(colors: dict[str, str]) -> tuple[float, str, str, str]:
    """The two colours of ``colors`` least apart, under every vision: (ΔE00, vision, a, b)."""
    return min(
        (delta_e2000(lab(simulate(colors[a], m)), lab(simulate(colors[b], m))), vision, a, b)
        for vision, m in VISIONS.items()
        for a, b in itertools.combinations(colors, 2)
    )


@pytest.mark.parametrize("group", ["collectives", "memory"])
def test_every_pair_stays_apart_for_colour_blind_readers(group):
    colors = palette.COLLECTIVES if group == "collectives" else palette.MEMORY
    assert len(colors) == (4 if group == "collectives" else len(memory_view.CATEGORIES))
    assert closest_pair(colors)[0] >= MIN_DELTA_E, closest_pair(colors)
    # and hatching tells them apart without any colour at all
    hatches = palette.HATCHES if group == "collectives" else palette.MEMORY_HATCHES
    assert len({hatches[k] for k in colors}) == len(colors)


def test_the_views_draw_with_the_palette():
    from labkit.views import gantt

    assert {k: gantt.COLORS[k] for k in palette.COLLECTIVES} == palette.COLLECTIVES
    assert memory_view.COLORS == palette.MEMORY
    assert dashboard.RANK_COLORS == palette.SERIES and set(palette.SERIES) - {palette.GREY} <= set(
        palette.OKABE_ITO.values()
    )


# -- contrast: every text on what it is drawn on --------------------------------------------------


def test_wcag_contrast_of_known_pairs():
    assert palette.contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert palette.contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # WCAG's famous near miss
    assert palette.contrast("#ffffff", "#0072B2") == pytest.approx(5.19, abs=0.01)


@pytest.mark.parametrize("color", sorted(set(palette.TIMELINE.values()) | set(palette.MEMORY.values())))
def test_text_on_every_bar_colour_has_aa_contrast(color):
    assert palette.contrast(palette.text_on(color), color) >= palette.AA_TEXT


def fake_timeline() -> dict[int, list[dict]]:
    from labkit import timeline

    spans, t = [], 0.0
    for i, kind in enumerate(("all_gather", "forward", "all_gather", "backward", "reduce_scatter", "all_reduce")):
        stream = "comm" if kind in palette.COLLECTIVES else "compute"
        spans.append(timeline.span(f"layers.{i}", kind, t, t + 0.004, stream, bytes=10))
        t += 0.003
    spans.append(timeline.span("layers.0", "held", 0.0, t, "memory"))
    return {0: spans, 1: [dict(s, rank=1) for s in spans]}


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_gantt_labels_are_8pt_with_aa_contrast_and_collectives_hatched(theme, monkeypatch):
    from matplotlib.colors import to_hex

    from labkit.views import gantt

    monkeypatch.setenv("LABKIT_THEME", theme)
    fig = gantt.plot_timeline(fake_timeline())
    ax = fig.axes[0]
    background = to_hex(fig.get_facecolor())
    assert background == palette.FIGURE_COLORS[theme]["background"]
    labels = [x for x in ax.texts if x.get_bbox_patch() is not None]
    assert len(labels) >= 6  # the unit names on the bars
    for text in ax.texts:
        assert text.get_fontsize() >= 8, text.get_text()
        behind = to_hex(text.get_bbox_patch().get_facecolor()) if text.get_bbox_patch() else background
        assert palette.contrast(to_hex(text.get_color()), behind) >= palette.AA_TEXT, text.get_text()
    for text in (ax.title, ax.xaxis.label, *ax.get_yticklabels()):
        assert palette.contrast(to_hex(text.get_color()), background) >= palette.AA_TEXT
    hatched = {to_hex(c.get_facecolor()[0]): c.get_hatch() for c in ax.collections if c.get_hatch()}
    assert set(hatched) == {palette.COLLECTIVES[k].lower() for k in ("all_gather", "reduce_scatter", "all_reduce")}
    assert len(set(hatched.values())) == 3
    legend = {h.get_label(): h.get_hatch() for h in ax.get_legend().legend_handles}
    assert legend["all-gather"] != legend["reduce-scatter"] and legend["all-gather"]


def test_memory_breakdown_bars_are_hatched_per_category(monkeypatch):
    from matplotlib.colors import to_hex

    monkeypatch.setenv("LABKIT_THEME", "dark")
    events = {0: [memcat(0)], 1: [memcat(1)]}
    fig = memory_view.plot_breakdown(events)
    bars = [p for p in fig.axes[0].patches if p.get_height() > 0]
    by_color = {to_hex(p.get_facecolor()): p.get_hatch() for p in bars}
    assert by_color == {
        palette.MEMORY[c].lower(): palette.mpl_hatch(palette.MEMORY_HATCHES[c]) for c in memory_view.CATEGORIES
    }
    assert to_hex(fig.get_facecolor()) == palette.FIGURE_COLORS["dark"]["background"]


def memcat(rank: int) -> dict:
    cats = {c: (i + 1 + rank) * 2**20 for i, c in enumerate(memory_view.CATEGORIES)}
    return {"t": "memcat", "rank": rank, "step": 1, "phase": "peak", "categories": cats}


@pytest.mark.parametrize("name", ["light", "dark"])
def test_figure_themes_have_aa_text(name):
    c = palette.FIGURE_COLORS[name]
    assert palette.contrast(c["text"], c["background"]) >= palette.AA_TEXT
    assert palette.contrast(c["lines"], c["background"]) >= 3.0  # axes and ticks: WCAG's 3:1 for graphics
    rc = palette.figure_rc(name)
    assert rc["text.color"] == rc["axes.labelcolor"] == rc["xtick.labelcolor"] == c["text"]


def test_the_theme_from_labkit_theme_then_jupyterlabs_setting(tmp_path, monkeypatch):
    monkeypatch.delenv("LABKIT_THEME", raising=False)
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(tmp_path))
    assert palette.theme() == "light"  # nothing saved: matplotlib's own look
    path = tmp_path / palette.THEME_SETTINGS
    path.parent.mkdir(parents=True)
    # as JupyterLab's settings editor saves it: JSON5, with comments
    path.write_text(
        '{\n    // Theme\n    // @jupyterlab/apputils-extension:themes\n    "theme": "JupyterLab Dark"\n}\n'
    )
    assert palette.theme() == "dark"
    path.write_text('{"theme": "JupyterLab Light", "theme-scrollbars": false}')
    assert palette.theme() == "light"
    path.write_text('{"theme": "JupyterLab Dark", "adaptive-theme": true}')  # follows the system: unknowable
    assert palette.theme() == "light"
    monkeypatch.setenv("LABKIT_THEME", "dark")
    assert palette.theme() == "dark"
    monkeypatch.setenv("LABKIT_THEME", "sepia")  # not a theme labkit has: the setting decides
    assert palette.theme() == "light"
    monkeypatch.delenv("JUPYTERLAB_SETTINGS_DIR")  # JupyterLab's default: lab/user-settings in the config folder
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "config"))
    assert palette.settings_dir() == str(tmp_path / "config" / "lab" / "user-settings")


# -- the HTML's colours, resolved as JupyterLab's light and dark themes define its variables --------


def jupyterlab_theme_vars(name: str) -> dict[str, str]:
    """The ``--jp-*``/``--md-*`` variables of JupyterLab's installed theme CSS (``light`` or ``dark``)."""
    css = Path(sys.prefix) / "share/jupyter/lab/themes/@jupyterlab" / f"theme-{name}-extension" / "index.css"
    if not css.exists():
        pytest.skip(f"JupyterLab's {name} theme CSS is not installed here ({css})")
    return {k: v.strip() for k, v in re.findall(r"(--(?:jp|md)-[\w-]+)\s*:\s*([^;}]+)", css.read_text())}


def resolve(value: str, variables: dict[str, str]) -> str:
    """``var(--x, fallback)`` as the browser reads it, innermost first; without ``variables``, the fallbacks."""
    pattern = re.compile(r"var\(\s*(--[\w-]+)\s*(?:,\s*([^()]*?))?\s*\)")
    while (m := pattern.search(value)) is not None:
        name, fallback = m.groups()
        value = value[: m.start()] + variables.get(name, fallback or "") + value[m.end() :]
    return value.strip()


def rgba(value: str, below: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> tuple[float, float, float]:
    """A CSS colour (hex, white, rgba(), color-mix(in srgb, ...)) as sRGB 0..1, alpha blended over ``below``."""
    value = value.strip()
    if m := re.fullmatch(r"color-mix\(in srgb,\s*(.+?)\s+(\d+)%,\s*(.+)\)", value):
        a, share, b = rgba(m.group(1), below), int(m.group(2)) / 100, rgba(m.group(3), below)
        return tuple(share * x + (1 - share) * y for x, y in zip(a, b))
    if m := re.fullmatch(r"rgba?\(([^)]*)\)", value):
        parts = [float(p) for p in m.group(1).split(",")]
        alpha = parts[3] if len(parts) == 4 else 1.0
        return tuple(alpha * p / 255 + (1 - alpha) * q for p, q in zip(parts[:3], below))
    return palette.rgb({"white": "#ffffff", "black": "#000000"}.get(value, value))


def hexed(c: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(x * 255):02x}" for x in c)


def style_of(markup: str, prop: str) -> str:
    """The value of ``prop`` in the first style in ``markup`` that sets it (semicolons inside parentheses kept)."""
    for style in re.findall(r"style=\"([^\"]*)\"|style='([^']*)'", markup) or [(markup, "")]:
        decls, depth, start, text = [], 0, 0, "".join(style)
        for i, ch in enumerate(text + ";"):
            depth += ch == "("
            depth -= ch == ")"
            if ch == ";" and depth == 0:
                decls.append(text[start:i])
                start = i + 1
        for decl in decls:
            name, _, value = decl.partition(":")
            if name.strip() == prop:
                return value.strip()
    raise AssertionError(f"no {prop} in {markup}")


def text_pairs() -> list[tuple[str, str, str]]:
    """(what, text colour, background) as labkit's HTML writes them: CSS, variables unresolved."""
    pairs = []
    for status in ("correct", "wrong", "unanswered", "recorded", "deferred"):
        box = CheckResult("x", status, 0, 1, None, {}, "en").html()
        pairs.append((f"check {status}", style_of(box, "color"), style_of(box, "background")))
    stderr = dashboard.STDERR
    pairs.append(("stderr line", style_of(stderr, "color"), style_of(stderr, "background")))
    for page in ("var(--jp-layout-color0, #ffffff)", "var(--jp-layout-color1, #ffffff)"):  # output, widget panel
        pairs += [("text", dashboard.TEXT, page), ("muted", dashboard.MUTED, page)]
    return pairs


@pytest.mark.parametrize("theme", ["fallbacks", "light", "dark"])
def test_every_text_and_background_pair_has_aa_contrast(theme):
    variables = {} if theme == "fallbacks" else jupyterlab_theme_vars(theme)
    page = (1.0, 1.0, 1.0) if theme != "dark" else rgba(resolve("var(--jp-layout-color0)", variables))
    for what, text, background in text_pairs():
        text, background = resolve(text, variables), resolve(background, variables)
        if text == "currentColor":  # no theme at all: the frontend's own text colour, whatever it is
            continue
        behind = rgba(background, page)
        ratio = palette.contrast(hexed(rgba(text, behind)), hexed(behind))
        assert ratio >= palette.AA_TEXT, (theme, what, text, background, round(ratio, 2))


def test_check_boxes_keep_their_colours_as_fallbacks_and_follow_the_theme():
    wrong = CheckResult("x", "wrong", 0, 1, None, {}, "en").html()
    assert "var(--jp-error-color1, #c62828)" in wrong and 'class="labkit-check"' in wrong
    for prop in ("color", "background"):  # no fixed colour the dark theme would keep
        assert "var(--jp-" in style_of(wrong, prop), style_of(wrong, prop)


# -- SVG for screen readers -----------------------------------------------------------------------


def test_memory_svgs_have_a_title_a_role_and_a_label(tmp_path):
    from test_dashboard_view import fake_run

    run = fake_run(2, tmp_path)
    for markup in (dashboard.memory_svg(run), memory_view.breakdown_html({0: memcat(0), 1: memcat(1)})):
        svg = ET.fromstring(markup)
        assert svg.get("role") == "img" and len(svg.get("aria-label")) > 20
        title = svg.find("title")
        assert title is not None and title.text and svg[0] is title  # the first child: what it is named by
        assert svg.get("aria-label").startswith(title.text)
        for rank in ("0", "1"):
            assert f"rank {rank}" in svg.get("aria-label")  # each rank's figures are read out
    bars = ET.fromstring(memory_view.breakdown_html({0: memcat(0)}))
    patterns = {p.get("id") for p in bars.iter("pattern")}
    fills = {r.get("fill").split(" ")[0] for r in bars.iter("rect") if r.get("fill", "").startswith("url(")}
    assert fills == {f"url(#{p})" for p in patterns} and len(patterns) == 5  # params solid, the rest hatched
    other = ET.fromstring(memory_view.breakdown_html({0: memcat(1)}))
    assert patterns.isdisjoint(p.get("id") for p in other.iter("pattern"))  # ids of its own per SVG
    assert memory_view.breakdown_html({0: memcat(0)}) == memory_view.breakdown_html(
        {0: memcat(0)}
    )  # same bars, same HTML
    assert "rank 0" in bars.get("aria-label") and memory_view.category_label("grads") in bars.get("aria-label")
