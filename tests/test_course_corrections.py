"""Issue 49's corrections to the lessons, in both editions: each corrected statement is there, the wrong one is not.

    PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_course_corrections.py     # no kernel: a second

What can be shown on ranks is shown in tests/test_fsdp2_facts.py (new parameter objects after
``fully_shard``, ``reshard_after_forward``'s default read from the modules, both activation-
checkpointing APIs on FSDP2); this file holds the text: the sources' English and Romanian cells
and the built notebooks of both editions, whitespace folded so that a rewrapped line still matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from labkit.course import source
from labkit.course.source import Code, Markdown

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Correction:
    name: str
    lesson: str  # the source's file name, "07_fsdp2_70b"
    present: dict[str, tuple[str, ...]]  # {"en": (...), "ro": (...)}: what the lesson now says
    absent: dict[str, tuple[str, ...]]  # what it said before, and must not say again


CORRECTIONS = (
    Correction(
        "fully_shard registers new nn.Parameter objects: the optimizer after it, in FSDP2 too",
        "07_fsdp2_70b",
        {
            "en": (
                "`fully_shard` registers a new `nn.Parameter` under each name",
                "build it *after* `fully_shard`, in FSDP2 as in FSDP1",
                "compares the objects by identity",
                "but registers new `nn.Parameter` objects: build the optimizer after it",
            ),
            "ro": (
                "`fully_shard` înregistrează sub fiecare nume un `nn.Parameter` nou",
                "trebuie construit *după* `fully_shard`, în FSDP2 ca și în FSDP1",
                "compară obiectele după identitate",
                "dar înregistrează obiecte `nn.Parameter` noi: construiți optimizatorul după el",
            ),
        },
        {"en": ("and so do the `nn.Parameter` objects",), "ro": ("la fel și obiectele `nn.Parameter`",)},
    ),
    Correction(
        "reshard_after_forward's default in torch 2.13, in lesson 2",
        "02_zero3_sharding",
        {
            "en": ("`reshard_after_forward=None` means `True` for every module but the root and `False` for the root",),
            "ro": (
                "`reshard_after_forward=None` înseamnă `True` pentru fiecare modul în afară de rădăcină și `False` "
                "pentru rădăcină",
            ),
        },
        {
            "en": ("explicitly too, because the default changed between releases.",),
            "ro": ("unități, pentru că valoarea implicită s-a schimbat de la o versiune la alta.",),
        },
    ),
    Correction(
        "reshard_after_forward's default in torch 2.13, in lesson 7",
        "07_fsdp2_70b",
        {
            "en": (
                "In torch 2.13 it is `None`: `True` for every module but the root, `False` for the root",
                "the default, `reshard_after_forward=None`, is `True` for every module but the root",
            ),
            "ro": (
                "În torch 2.13 este `None`: `True` pentru fiecare modul în afară de rădăcină, `False` pentru rădăcină",
                "valoarea implicită, `reshard_after_forward=None`, înseamnă `True` pentru fiecare modul",
            ),
        },
        {
            "en": ("should be set explicitly (`False` for the root, as the documentation advises)",),
            "ro": ("trebuie setat explicit (`False` pentru rădăcină, cum recomandă documentația)",),
        },
    ),
    Correction(
        "both activation-checkpointing APIs work with FSDP2, before fully_shard",
        "06_activations_recomputation",
        {
            "en": (
                "It works with both APIs",
                "in FSDP2 it goes before `fully_shard`, as torchtitan does",
                "the composable `torch.distributed._composable.checkpoint(module)`",
            ),
            "ro": (
                "Funcționează cu ambele API-uri",
                "în FSDP2 se aplică înainte de `fully_shard`, cum fac torchtitan",
                "`torch.distributed._composable.checkpoint(module)`, varianta compozabilă",
            ),
        },
        {
            "en": (
                "- FSDP2: the module's forward runs inside",
                "FSDP1 asks with `apply_activation_checkpointing`, FSDP2 with `checkpoint`",
            ),
            "ro": (
                "- FSDP2: trecerea directă a modulului rulează în",
                "FSDP1 o cere cu `apply_activation_checkpointing`, FSDP2 cu `checkpoint`",
            ),
        },
    ),
    Correction(
        "the root is not gathered again in backward with FSDP2's default",
        "04_prefetch_overlap",
        {
            "en": (
                "Neither run gathers the root again in backward",
                "passing `True` to the root would add one more all-gather to every backward",
            ),
            "ro": (
                "Niciuna dintre rulări nu mai colectează rădăcina în trecerea inversă",
                "un `True` dat rădăcinii ar adăuga fiecărei treceri inverse încă o colectare",
            ),
        },
        {
            "en": ("FSDP2 also gathers the root again in backward",),
            "ro": ("FSDP2 mai colectează o dată și rădăcina în trecerea inversă",),
        },
    ),
    Correction(
        "sync_module_states maps to set_model_state_dict(broadcast_from_rank0=True); meta init to param_init_fn",
        "07_fsdp2_70b",
        {
            "en": (
                "| `sync_module_states=True` (rank 0's weights to every rank) | `set_model_state_dict(model, full, "
                "options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))`",
                "| `param_init_fn=...` (to initialize a model built on the meta device) | build on the meta device",
            ),
            "ro": (
                "| `sync_module_states=True` (ponderile rangului 0 trimise fiecărui rang) | `set_model_state_dict(model, "
                "full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))`",
                "| `param_init_fn=...` (ca să inițializeze un model construit pe dispozitivul meta) |",
            ),
        },
        {
            "en": ("| `param_init_fn=...`, `sync_module_states=True` |",),
            "ro": ("| `param_init_fn=...`, `sync_module_states=True` |",),
        },
    ),
    Correction(
        "ZeRO-Offload's CPU update overlaps the GPU only with the delayed parameter update",
        "05_offload_mixed_precision",
        {
            "en": ("one-step delayed parameter update (DPU)", "Without it the GPU waits for the CPU's step."),
            "ro": ("(delayed parameter update, DPU)", "Fără ea, GPU-ul așteaptă pasul procesorului."),
        },
        {
            "en": ("by a vectorized CPU Adam while the GPU keeps computing",),
            "ro": ("vectorizat pentru CPU în timp ce GPU-ul continuă să calculeze",),
        },
    ),
    Correction(
        "an '80 GB' card is about 79.1 GiB, not 80 GiB",
        "07_fsdp2_70b",
        {"en": ("torch reports a total of about 79.1 GiB",), "ro": ("torch raportează în total aproximativ 79,1 GiB",)},
        {"en": ("is in fact 80 GiB",), "ro": ("sunt de fapt 80 GiB",)},
    ),
    Correction(
        "FSDP2 still waits on streams and events; it drops record_stream and the CPU wait",
        "04_prefetch_overlap",
        {
            "en": ("FSDP2 still orders its CUDA streams with events", "what it drops is `Tensor.record_stream`"),
            "ro": (
                "FSDP2 își ordonează în continuare fluxurile CUDA cu evenimente",
                "renunță însă la `Tensor.record_stream`",
            ),
        },
        {
            "en": ("without the CUDA-stream bookkeeping that made FSDP1 need a limiter",),
            "ro": ("fără evidența pe fluxuri CUDA care îl obliga pe FSDP1 să aibă un limitator",),
        },
    ),
    Correction(
        "FSDP2 copies each group's shards into one flat buffer per collective",
        "02_zero3_sharding",
        {
            "en": ("though each collective still moves one flat buffer",),
            "ro": ("fiecare operație colectivă mută tot un singur tampon plat",),
        },
        {"en": ("It flattens nothing",), "ro": ("Nu aplatizează nimic",)},
    ),
    Correction(
        "set_reshard_after_backward(False) saves only the forward all-gathers; unsynced gradients in reduce_dtype",
        "06_activations_recomputation",
        {
            "en": ("that saves only the forward's all-gathers", "FSDP2 accumulates an unsynced gradient in that dtype"),
            "ro": (
                "asta economisește doar colectările trecerii directe",
                "FSDP2 acumulează un gradient nesincronizat în acest tip",
            ),
        },
        {"en": (), "ro": ()},
    ),
    *(
        Correction(
            f"FSDP1 is not deprecated by torch itself, in {lesson}",
            lesson,
            {"en": (en,), "ro": (ro,)},
            {"en": ("calls it deprecated",), "ro": ("o declară învechită și", "documentația o declară învechită")},
        )
        for lesson, en, ro in (
            ("00_setup", "Torch itself does not deprecate it", "Torch însuși nu o declară învechită"),
            (
                "02_zero3_sharding",
                "though torch does not deprecate it as a whole",
                "deși torch nu o declară învechită în întregime",
            ),
        )
    ),
    Correction(
        "lesson 2 names what torch 2.13 warns for, and where 'FSDP1 is deprecated' is written",
        "02_zero3_sharding",
        {
            "en": ("`distributed/FSDP/README.md` of pytorch/examples", "`FSDP.state_dict_type()`"),
            "ro": ("`distributed/FSDP/README.md` din pytorch/examples", "`FSDP.state_dict_type()`"),
        },
        {"en": (), "ro": ()},
    ),
)

# Item 6: where a GPU changes the answer, the lesson says so; the GPU tools are shown, labelled not run here.
GPU_NOTES = (
    (
        "01_ddp_memory_wall",
        {
            "en": ("On a GPU there is one more figure", "(not run here: they need CUDA"),
            "ro": ("Pe un GPU mai există o cifră", "(nu rulează aici: au nevoie de CUDA"),
        },
        ("torch.cuda.memory._record_memory_history(", "torch.cuda.memory._dump_snapshot("),
    ),
    (
        "04_prefetch_overlap",
        {
            "en": ("On GPUs the tool for this chart is PyTorch's profiler (Kineto)", "(not run here: it needs CUDA)"),
            "ro": (
                "Pe GPU-uri, unealta pentru acest grafic este profilerul PyTorch (Kineto)",
                "(nu rulează aici: are nevoie de CUDA)",
            ),
        },
        ("ProfilerActivity.CUDA", "prof.export_chrome_trace("),
    ),
    (
        "06_activations_recomputation",
        {"en": ("On a GPU the price is steadier",), "ro": ("Pe un GPU prețul este mai stabil",)},
        (),
    ),
    (
        "07_fsdp2_70b",
        {
            "en": ("PyTorch's caching allocator reserves memory in blocks",),
            "ro": ("alocatorul cu cache al PyTorch rezervă memoria în blocuri",),
        },
        (),
    ),
)


def fold(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def source_prose(lesson: str, lang: str) -> str:
    cells = source.read(source.LESSONS / f"{lesson}.md").cells
    return fold("\n\n".join(c.text[lang] for c in cells if isinstance(c, Markdown)))


def notebook_prose(lesson: str, lang: str) -> str:
    nb = nbformat.read(ROOT / "notebooks" / lang / f"{lesson}.ipynb", as_version=4)
    return fold("\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))


def code(lesson: str) -> str:
    return "\n\n".join(c.source for c in source.read(source.LESSONS / f"{lesson}.md").cells if isinstance(c, Code))


@pytest.mark.parametrize("lang", ["en", "ro"])
@pytest.mark.parametrize("correction", CORRECTIONS, ids=lambda c: c.name)
def test_each_correction_is_in_the_source_and_the_built_notebook(correction: Correction, lang: str):
    for where, prose in (
        ("source", source_prose(correction.lesson, lang)),
        ("notebook", notebook_prose(correction.lesson, lang)),
    ):
        missing = [s for s in correction.present[lang] if fold(s) not in prose]
        left = [s for s in correction.absent[lang] if fold(s) in prose]
        assert not missing and not left, f"{correction.lesson} ({lang}, {where}): missing {missing}, still there {left}"


@pytest.mark.parametrize("lang", ["en", "ro"])
@pytest.mark.parametrize(("lesson", "notes", "calls"), GPU_NOTES, ids=[n[0] for n in GPU_NOTES])
def test_gpu_notes_and_tools_are_labelled(
    lesson: str, notes: dict[str, tuple[str, ...]], calls: tuple[str, ...], lang: str
):
    for prose in (source_prose(lesson, lang), notebook_prose(lesson, lang)):
        assert all(fold(n) in prose for n in notes[lang]), f"{lesson} ({lang})"
        assert all(call in prose for call in calls), f"{lesson} ({lang}): the GPU tool's calls"
    assert not any(call in code(lesson) for call in calls), "shown, not run: the calls need CUDA"


def test_lesson7_compares_the_parameter_objects_on_the_ranks():
    text = code("07_fsdp2_70b")
    assert "p is originals[name]" in text and 'show.say("parameters_kept"' in text
    assert "optimizer = torch.optim.AdamW(model.parameters()" in text.split("build(originals)")[1]


def test_lesson7_plans_with_usable_memory_not_80_gib():
    text = code("07_fsdp2_70b")
    assert "80 * 2**30" not in text and "usable = (79.1 - 2) * 2**30" in text


def test_a_correction_missing_from_one_edition_is_found():
    """The test can fail: a sentence only the English edition has is missing from the Romanian one."""
    english_only = "`fully_shard` registers a new `nn.Parameter` under each name"
    assert fold(english_only) in source_prose("07_fsdp2_70b", "en")
    assert fold(english_only) not in source_prose("07_fsdp2_70b", "ro")
