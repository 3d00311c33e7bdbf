"""One Romanian term per concept, the glossary's, in the lessons, labkit's messages and the hints.

For backend, token, broadcast, kernel, embedding and payload the glossary (labkit/course/glossary.py)
names the Romanian term; the Romanian markdown of labkit/course/lessons/*.md and every Romanian
message (the questions' hints included) may use no competing word for it. The English word may
stand in parentheses after the Romanian one, where a lesson introduces the term, and in code.

.venv/bin/pytest tests/test_ro_terms.py -q
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from labkit import i18n
from labkit.course import glossary

ROOT = Path(__file__).resolve().parents[1]

# concept -> (the glossary's key, the competing variants: a regex over Romanian prose outside code)
VARIANTS = {
    "backend": ("backend", r"\bbackend\w*(?!\s*\))(?![='\w])"),
    "token": ("token", r"\bsimbol\w*|\bjeton\w*"),
    "broadcast": ("broadcast", r"\bbroadcast\w*(?!\s*\))|\btransmisi\w* către toate"),
    "kernel": ("kernel", r"\bnucle\w*\s+(?:fuzionat\w*|NCCL|CUDA|al sistemului|sistemului|Linux|GPU)"),
    "embedding": ("embedding", r"\bembedding\w*(?!\s*\))|\bînglob\w*|\bscufund\w*"),
    "payload": ("payload", r"\bpayload\w*(?!\s*\))|\bîncărcătur\w*|\bsarcin\w* util\w*"),
}
CODE = re.compile(r"```.*?```|`[^`]*`|\{[\w.]+(?:![rs])?(?::[^{}]*)?\}|--[\w-]+|\w+=\S+", re.S)


def ro_markdown(text: str) -> list[str]:
    """The Romanian markdown cells of a lesson's MyST source (``+++ {"tags": ["lang-ro"]}``)."""
    cells, current = [], None
    for line in text.splitlines():
        if line.startswith(("+++", "```{code-cell")):
            if current is not None:
                cells.append("\n".join(current))
            current = [] if '"lang-ro"' in line else None
        elif current is not None:
            current.append(line)
    if current is not None:
        cells.append("\n".join(current))
    return cells


def romanian_texts() -> dict[str, str]:
    from labkit.grading import registry

    texts = {}
    for path in sorted((ROOT / "labkit" / "course" / "lessons").glob("*.md")):
        for i, cell in enumerate(ro_markdown(path.read_text(encoding="utf-8"))):
            texts[f"{path.name} cell {i}"] = cell
    registry.load_questions()  # the hints
    for key, entry in i18n.all_messages().items():
        texts[f"message {key}"] = entry["ro"]
    for key, term in glossary.GLOSSARY.items():
        texts[f"glossary {key}"] = f"{term.ro} {term.ro_note}"
    return texts


def variants_in(text: str, pattern: str) -> list[str]:
    return re.findall(pattern, CODE.sub(" ", text), re.I)


@pytest.mark.parametrize("concept", sorted(VARIANTS))
def test_one_romanian_term_per_concept(concept):
    key, pattern = VARIANTS[concept]
    assert key in glossary.GLOSSARY, f"the glossary names the Romanian term for {concept}"
    found = {where: hits for where, text in romanian_texts().items() if (hits := variants_in(text, pattern))}
    assert found == {}, f"{concept} is «{glossary.GLOSSARY[key].ro}» in Romanian (the glossary's): {found}"


def test_the_variant_check_finds_one_and_spares_code_and_introductions():
    backend = VARIANTS["backend"][1]
    assert variants_in("un fapt al backend-ului", backend) == ["backend"]
    assert variants_in("ce backend este vorba", backend) == ["backend"]
    assert variants_in("o **bibliotecă de comunicare (backend)**", backend) == []
    assert variants_in("Folosiți backend='gloo' sau `--backend auto`, backend=auto: {backend}", backend) == []
    assert variants_in("nucleul fuzionat al atenției, pe 8 nuclee CPU", VARIANTS["kernel"][1]) == ["nucleul fuzionat"]
    assert variants_in("128.256 de simboluri (tokens)", VARIANTS["token"][1]) == ["simboluri"]
