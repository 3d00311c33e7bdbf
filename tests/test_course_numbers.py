"""Every number the lessons' prose states comes from the notebook or from a cited source.

    .venv/bin/pytest tests/test_course_numbers.py -q        # no kernel, no ranks: about a second

The course's rule (README, docs/architecture.md): a number the course shows is measured
on the student's ranks or comes from a formula the course checks. A figure typed into a
markdown cell is neither, unless the notebook's own code produces it. So this test reads
the built notebooks' markdown cells (both editions) and fails on any number that is

- not a literal of one of that notebook's code cells, nor in one of its stored outputs
  (the ``pure`` cells' outputs the build runs and stores; scaled by a unit prefix, or
  rounded to the prose's precision, still counts: "1.6 GiB" from a printed 1.594 GiB);
- and not in ``CITED``, the one list of constants the prose takes from a source, each
  with that source.

Not numbers in this sense: inline code and links; a heading's or list item's numbering;
names that carry a digit (ZeRO-3, fp32, bf16, 2-D, H100, Llama-70B); references to a
lesson, exercise, section, step, example or figure ("lesson 3", "Exercițiul 2").
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*/*.ipynb"))

# value as the prose writes it (English format) -> its source. Add a line here only with a source.
CITED: dict[str, str] = {
    "2020": "Rajbhandari et al., ZeRO: Memory Optimizations Toward Training Trillion Parameter Models, SC 2020",
    "2021": "Ren et al., ZeRO-Offload, USENIX ATC 2021",
    "2022": "Korthikanti et al., Reducing Activation Recomputation in Large Transformer Models, 2022",
    "2023": "Wang et al., ZeRO++, 2023; Zhao et al., PyTorch FSDP, VLDB 2023",
    "120": "ZeRO paper, Figure 1: 7.5B parameters on 64 GPUs, stage 0 (DDP), GB per GPU",
    "31.4": "ZeRO paper, Figure 1: 7.5B parameters on 64 GPUs, stage 1, GB per GPU",
    "16.6": "ZeRO paper, Figure 1: 7.5B parameters on 64 GPUs, stage 2, GB per GPU",
    "1.9": "ZeRO paper, Figure 1: 7.5B parameters on 64 GPUs, stage 3, GB per GPU",
    "7.5": "ZeRO paper, Figure 1: the example model, 7.5 billion parameters",
    "64": "ZeRO paper, Figure 1: the example's 64 GPUs",
    "18": "DeepSpeed's memory estimators: 18 bytes per parameter with fp32 gradients (DeepSpeed docs, estimate_zero3_model_states_mem_needs)",
    "80": "NVIDIA A100 80GB and H100 SXM datasheets: 80 GB of HBM per GPU",
    "8": "NVIDIA DGX/HGX H100 and A100 systems: 8 GPUs per node",
    "100": "InfiniBand/Ethernet NIC line rate, 100 Gb/s (labkit.simulate.LINKS['ib100'])",
    "450": "NVLink 4 on H100: 450 GB/s per direction per GPU (labkit.simulate.LINKS['nvlink4'])",
    "25": "PCIe 4.0 x16: about 25 GB/s per direction in practice (labkit.simulate.LINKS['pcie4'])",
    "24": "IEEE 754 binary32: a 24-bit significand (bfloat16: 8 bits), the precision lesson 5 compares",
    "16": "ZeRO paper, section 3.1: mixed-precision Adam keeps 2 + 2 + 12 = 16 bytes per parameter",
    "1800": "torch.distributed default process-group timeout, 1800 s (torch docs, init_process_group)",
    "2.13": "the torch version this course is tested on (pyproject.toml)",
}

REFERENCE = re.compile(
    r"\b(?:lessons?|lec[țt]i(?:a|ile|ei|e)|exercises?|exerci[țt]iul(?:ui)?|exerci[țt]iile|sections?|sec[țt]iunea|"
    r"steps?|pasul|examples?|exemplul(?:ui)?|figure|figura|parts?|partea|stages?|etapa|etapele)\s+\d+(?:\s*(?:,|and|și|to|-|–|până la)\s*\d+)*",
    re.IGNORECASE,
)
CODE_SPAN = re.compile(r"`[^`]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)|https?://\S+")
NUMBERING = re.compile(r"^\s*(?:#+\s*\d+\.|\d+\.\s|[-*]\s+\*\*\w\.\*\*)", re.M)
# a number not glued to a letter, digit or hyphenated name: "ZeRO-3", "fp32", "2-D" are names
NUMBER = re.compile(r"(?<![\w\-.,/])(\d+(?:[.,]\d+)*)(?![\w]|-\w|\.\d|,\d)")
LITERAL = re.compile(r"(?<![\w.])(\d+(?:_\d+)*(?:\.\d+)?(?:e[+-]?\d+)?)")
OUTPUT_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def parse(text: str, lang: str) -> float:
    """'1,103.6' (en) or '1.103,6' (ro) -> 1103.6; a lone separator before 3 digits groups thousands."""
    thousands, decimal = (",", ".") if lang == "en" else (".", ",")
    if thousands in text and decimal not in text and not re.fullmatch(rf"\d{{1,3}}(?:\{thousands}\d{{3}})+", text):
        thousands, decimal = decimal, thousands  # e.g. "0,5" in an English list is not a thousands group
    return float(text.replace(thousands, "").replace(decimal, "."))


def decimals(text: str, lang: str) -> int:
    decimal = "." if lang == "en" else ","
    return len(text.split(decimal)[1]) if decimal in text and not re.fullmatch(r"\d{1,3}(?:[.,]\d{3})+", text) else 0


def known_values(nb: nbformat.NotebookNode, lang: str) -> set[float]:
    """Literals of the notebook's code cells and numbers in its stored outputs."""
    values: set[float] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for lit in LITERAL.findall(cell.source):
            values.add(float(lit.replace("_", "")))
        for out in cell.get("outputs", []):
            text = out.get("text", "") or "".join(out.get("data", {}).get("text/plain", ""))
            for num in OUTPUT_NUMBER.findall(text):  # a library's own table may print in either format
                for fmt in ("en", "ro"):
                    try:
                        values.add(parse(num, fmt))
                    except ValueError:
                        pass
    return values


def matches(value: float, places: int, known: set[float]) -> bool:
    scales = [1000.0**k for k in range(5)] + [1024.0**k for k in range(1, 5)]
    for k in known:
        for scale in scales:
            for v in (k / scale, k * scale):
                if abs(v - value) <= 1e-9 * max(1.0, abs(value)) or round(v, places) == value:
                    return True
    return False


def prose_numbers(markdown: str) -> list[str]:
    text = LINK_TARGET.sub("", CODE_SPAN.sub("", markdown))
    text = NUMBERING.sub("", REFERENCE.sub("", text))
    return NUMBER.findall(text)


def cited(value: float) -> bool:
    return any(abs(float(c) - value) < 1e-9 for c in CITED)


def unexplained(path: Path) -> list[str]:
    lang = path.parent.name
    nb = nbformat.read(path, as_version=4)
    known = known_values(nb, lang)
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for num in prose_numbers(cell.source):
            value = parse(num, lang)
            if not (matches(value, decimals(num, lang), known) or cited(value)):
                line = next(line for line in cell.source.splitlines() if num in line)
                found.append(f"{num!r} in: {line.strip()[:140]}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_number_in_the_prose_is_computed_or_cited(path):
    assert unexplained(path) == [], f"{path.relative_to(ROOT)}: numbers neither computed nor cited"


def test_the_scanner_finds_a_typed_number_and_accepts_a_computed_one():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("gpu_bytes = 80e9\nprint(1.594)", outputs=[]),
        nbformat.v4.new_markdown_cell("Lesson 3, ZeRO-3 in fp32: 1.6 GiB per block, 80 GB, and 42 ms `x = 7`."),
    ]
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="1.594 GiB\n")]
    known = known_values(nb, "en")
    left = [n for n in prose_numbers(nb.cells[1].source) if not matches(parse(n, "en"), decimals(n, "en"), known)]
    assert left == ["42"]


def test_romanian_numbers_are_read_in_romanian_format():
    assert parse("1.103,6", "ro") == 1103.6 and decimals("1.103,6", "ro") == 1
    assert parse("1,103.6", "en") == 1103.6 and decimals("31,4", "ro") == 1
    assert prose_numbers("cu 31,4 GB și 7,5 miliarde") == ["31,4", "7,5"]


def test_every_cited_constant_names_its_source():
    assert all(len(source) > 20 for source in CITED.values())
