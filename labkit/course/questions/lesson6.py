"""Lesson 6's questions: activations, recomputation and gradient accumulation.

Formulas are checked at sizes the notebook never shows (``registry.UNSEEN``); the activation
formula they share is ``labkit.memory.model.activation_memory``, tested against measured steps in
``tests/test_activation_formula.py``.
"""

from __future__ import annotations

from labkit.grading import exercises
from labkit.grading.registry import DTYPE_BYTES, Asks, question


@question(
    "lesson6.checkpointed_blocks",
    asks=Asks.REASONING,
    points=2,
    formula=True,
    mistakes={
        lambda micro_batch, seq_len, dim, n_blocks, precision: 2 * n_blocks * micro_batch * seq_len * dim: {
            "en": "2·s·b·h is Korthikanti's count for 16-bit activations; this model keeps its inputs in the "
            "precision it computes in.",
            "ro": "2·s·b·h este socoteala lui Korthikanti pentru activări de 16 biți; acest model își păstrează "
            "intrările în precizia în care calculează.",
        },
        lambda micro_batch, seq_len, dim, n_blocks, precision: 4 * n_blocks * micro_batch * seq_len * dim: {
            "en": "4 bytes per element is fp32 only: take the element size from precision.",
            "ro": "4 octeți pe element înseamnă doar fp32: luați dimensiunea elementului din precision.",
        },
        lambda micro_batch, seq_len, dim, n_blocks, precision: n_blocks * seq_len * dim * DTYPE_BYTES[precision]: {
            "en": "That is one sequence per block: each block's input holds every sequence of the micro-batch.",
            "ro": "Aceasta este o singură secvență pe bloc: intrarea fiecărui bloc ține toate secvențele micro-lotului.",
        },
        lambda micro_batch, seq_len, dim, n_blocks, precision: (
            (n_blocks + 1) * micro_batch * seq_len * dim * DTYPE_BYTES[precision]
        ): {
            "en": "One tensor too many: the last block's output is the final norm's input, kept outside the blocks.",
            "ro": "Un tensor în plus: ieșirea ultimului bloc este intrarea normalizării finale, păstrată în afara "
            "blocurilor.",
        },
    },
    hint={
        "en": "A checkpointed block keeps a single tensor until backward and rebuilds the rest: which tensor, "
        "and of what shape? Its elements are in the compute precision.",
        "ro": "Un bloc recalculat păstrează un singur tensor până la trecerea inversă și reface restul: care "
        "tensor, și de ce formă? Elementele lui sunt în precizia de calcul.",
    },
)
def _checkpointed_blocks(micro_batch: int, seq_len: int, dim: int, n_blocks: int, precision: str) -> float:
    return n_blocks * micro_batch * seq_len * dim * DTYPE_BYTES[precision]


question(
    "lesson6.accumulation",
    asks=Asks.MECHANISM,
    points=2,
    takes="run",
    observe=exercises.accumulation,
    hint={
        "en": "Each micro-batch's backward adds to .grad. FSDP2 reduce-scatters at the end of every backward unless "
        "the module is told not to sync its gradients; the last micro-batch must sync, so that the sum is reduced "
        "once. And the optimizer steps on the mean of the micro-batches, not their sum.",
        "ro": "Trecerea inversă a fiecărui micro-lot adaugă la .grad. FSDP2 reduce cu distribuire la sfârșitul "
        "fiecărei treceri inverse, dacă modulului nu i se spune să nu-și sincronizeze gradienții; ultimul micro-lot "
        "trebuie să sincronizeze, ca suma să fie redusă o singură dată. Iar optimizatorul face pasul pe media "
        "micro-loturilor, nu pe suma lor.",
    },
    hints=[
        {
            "en": "Before each micro-batch's forward, set the module's gradient sync: off for all but the last, on "
            "for the last. Divide each loss by the number of micro-batches before its backward.",
            "ro": "Înainte de trecerea directă a fiecărui micro-lot, setați sincronizarea gradienților modulului: "
            "oprită pentru toate în afară de ultimul, pornită pentru ultimul. Împărțiți fiecare pierdere la numărul "
            "de micro-loturi înainte de trecerea ei inversă.",
        },
        {
            "en": "The check wants as many forwards as the reference's, one per micro-batch and the probe; one "
            "reduce-scatter per unit in the whole step, issued by the last micro-batch's backward; and the loss "
            "after the SGD step equal to the reference's, which only the same mean gradient gives.",
            "ro": "Verificarea cere tot atâtea treceri directe cât referința, una pe micro-lot și proba; o singură "
            "reducere cu distribuire pe unitate în tot pasul, făcută de trecerea inversă a ultimului micro-lot; și "
            "pierderea de după pasul SGD egală cu a referinței, pe care o dă doar același gradient mediu.",
        },
    ],
)
