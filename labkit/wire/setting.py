"""One parallelism configuration, ``Setting``: the words ``"fsdp1:FULL_SHARD:BACKWARD_PRE"`` stands for, parsed and
checked in one place, printed back exactly as written.

    s = Setting.parse("fsdp1:FULL_SHARD:BACKWARD_PRE")
    s.flavor, s.strategy, s.backward_prefetch     # Flavor.FSDP1, Strategy.FULL_SHARD, Prefetch.BACKWARD_PRE
    str(s)                                        # "fsdp1:FULL_SHARD:BACKWARD_PRE"
    Setting.parse("fsdp1:FULL_SHARD:BACKWARD_PER")    # SettingError naming the word and the choices

The form, one grammar for the predictor (``labkit.timing.predict``), the test jobs (``labkit.testing``) and
the benchmarks: ``FLAVOR[:HEAD][:OPTION...][@MODEL]``.

- ``ddp``, ``plain``: no head;
- ``fsdp1:STRATEGY[:PREFETCH]``: a ``Strategy`` as torch names it, then the backward prefetch
  (``Prefetch``; not written: ``BACKWARD_PRE``, torch's default);
- ``fsdp2:WORD``: how ``fully_shard`` is applied (``Fsdp2``): ``reshard`` / ``keep`` (reshard after forward
  or not), ``hsdp`` and ``replicate`` (a 2-D mesh of shards of 2 ranks, of 1 rank), ``implicit`` /
  ``explicit`` (FSDP2's own prefetching, or explicit prefetch with asynchronous unshards);
- options (``Option``), in any order, each once: ``bf16``, ``sync``, ``ac``, ``nowrap``, and FSDP1's
  ``fwd``, ``nolimit``, ``post`` / ``noprefetch`` (the memory job's short spellings of the prefetch);
- ``@MODEL``: another model preset for this configuration (the memory job's ``@odd``).

The words are ``str`` enums, as ``labkit.wire.protocol.Msg`` is: ``Flavor.FSDP1 == "fsdp1"`` holds for a
string read back from JSON, and each prints as its value. ``Backend`` and ``Display`` (the run options'
choices) are here too, for the same reason: both sides of a run compare them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from labkit.i18n import t
from labkit.wire.record import Word

__all__ = ["Backend", "Display", "Flavor", "Fsdp2", "Option", "Prefetch", "Setting", "SettingError", "Strategy"]


class Flavor(Word):
    """How the model is wrapped."""

    PLAIN = "plain"  # not wrapped
    DDP = "ddp"  # DistributedDataParallel
    FSDP1 = "fsdp1"  # FullyShardedDataParallel
    FSDP2 = "fsdp2"  # fully_shard


class Strategy(Word):
    """What is sharded: torch's ``ShardingStrategy`` names, and ``DDP`` (replicated by DistributedDataParallel)."""

    FULL_SHARD = "FULL_SHARD"
    SHARD_GRAD_OP = "SHARD_GRAD_OP"
    NO_SHARD = "NO_SHARD"
    HYBRID_SHARD = "HYBRID_SHARD"
    HYBRID_SHARD_ZERO2 = "_HYBRID_SHARD_ZERO2"
    DDP = "DDP"

    @property
    def sharded(self) -> bool:
        """Parameters or states split across ranks (all but NO_SHARD and DDP)."""
        return self not in (Strategy.NO_SHARD, Strategy.DDP)

    @property
    def hybrid(self) -> bool:
        """Sharded within a group of ranks, replicated across the groups."""
        return self in (Strategy.HYBRID_SHARD, Strategy.HYBRID_SHARD_ZERO2)

    @property
    def reshards(self) -> bool:
        """Frees the gathered parameters after forward (ZeRO-3) rather than keeping them for backward."""
        return self in (Strategy.FULL_SHARD, Strategy.HYBRID_SHARD)


class Prefetch(Word):
    """FSDP1's backward prefetch (torch's ``BackwardPrefetch`` names); ``NONE``: none."""

    BACKWARD_PRE = "BACKWARD_PRE"
    BACKWARD_POST = "BACKWARD_POST"
    NONE = "NONE"

    @property
    def torch_name(self) -> str | None:
        """The ``BackwardPrefetch`` member's name, or None (``backward_prefetch=None``)."""
        return None if self is Prefetch.NONE else self.value


class Fsdp2(Word):
    """How ``fully_shard`` is applied: the word after ``fsdp2:``."""

    RESHARD = "reshard"  # reshard_after_forward=True
    KEEP = "keep"  # reshard_after_forward=False
    HSDP = "hsdp"  # a (replicate, shard) mesh, shards of 2 ranks
    REPLICATE = "replicate"  # a (replicate, shard) mesh, shards of 1 rank: FSDP2's NO_SHARD
    IMPLICIT = "implicit"  # reshard after forward, FSDP2's own prefetching
    EXPLICIT = "explicit"  # explicit forward and backward prefetch, asynchronous unshards

    @property
    def strategy(self) -> Strategy:
        return FSDP2_STRATEGY[self]


FSDP2_STRATEGY = {
    Fsdp2.RESHARD: Strategy.FULL_SHARD,
    Fsdp2.KEEP: Strategy.SHARD_GRAD_OP,
    Fsdp2.HSDP: Strategy.HYBRID_SHARD,
    Fsdp2.REPLICATE: Strategy.NO_SHARD,
    Fsdp2.IMPLICIT: Strategy.FULL_SHARD,
    Fsdp2.EXPLICIT: Strategy.FULL_SHARD,
}


class Option(Word):
    """The words after the head."""

    BF16 = "bf16"  # parameters gathered (and computed) in bf16
    SYNC = "sync"  # the recorder synchronizes the device at each span (the GPU mode)
    AC = "ac"  # activation checkpointing per block
    NOWRAP = "nowrap"  # no per-block units: the root only
    FWD = "fwd"  # FSDP1 forward_prefetch=True
    NOLIMIT = "nolimit"  # FSDP1 limit_all_gathers=False
    POST = "post"  # FSDP1 BACKWARD_POST (the memory job's spelling)
    NOPREFETCH = "noprefetch"  # FSDP1 no backward prefetch (the memory job's spelling)
    REF = "ref"  # the memory job: one more step, measured by torch's own memory tracker too


class Backend(Word):
    """The process group's backend for a run; ``AUTO``: nccl when every rank has a GPU, else gloo."""

    AUTO = "auto"
    GLOO = "gloo"
    NCCL = "nccl"


class Display(Word):
    """How a run shows itself in the notebook."""

    AUTO = "auto"
    WIDGETS = "widgets"
    TEXT = "text"
    NONE = "none"


FSDP1_STRATEGIES = tuple(s for s in Strategy if s is not Strategy.DDP)
OPTIONS: dict[Flavor, tuple[Option, ...]] = {
    Flavor.PLAIN: (Option.AC, Option.SYNC, Option.REF),
    Flavor.DDP: (Option.AC, Option.SYNC, Option.REF),
    Flavor.FSDP2: (Option.BF16, Option.SYNC, Option.AC, Option.NOWRAP, Option.REF),
    Flavor.FSDP1: tuple(Option),
}
SHORT_PREFETCH = {Option.POST: Prefetch.BACKWARD_POST, Option.NOPREFETCH: Prefetch.NONE}


class SettingError(ValueError):
    """A configuration that is not one: which word, in which setting, and the choices."""


def hint(word: str, choices: tuple[str, ...]) -> str:
    """`` (did you mean 'X'?)`` for the closest choice, case aside; "" when none is close."""
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1)
    return t("wire.setting.didyoumean", name=by_lower[close[0]]) if close else ""


def refuse(key: str, spec: str, word: str, choices: tuple[str, ...], **fields: object) -> SettingError:
    return SettingError(
        t(key, None, spec=spec, word=word, hint=hint(word, choices), choices=", ".join(choices), **fields)
    )


@dataclass(frozen=True)
class Setting:
    """One configuration. ``strategy`` is filled from the flavor when it is not written (ddp: DDP; fsdp2: its
    word's; plain: None); ``prefetch`` is FSDP1's as written (None: not written); see ``backward_prefetch``."""

    flavor: Flavor
    strategy: Strategy | None = None
    prefetch: Prefetch | None = None
    fsdp2: Fsdp2 | None = None
    options: tuple[Option, ...] = ()
    model: str | None = None

    def __post_init__(self) -> None:
        spec = self.written()
        put = object.__setattr__  # frozen: the words given as strings become the enums, once, here
        put(self, "flavor", pick(Flavor, self.flavor, "wire.setting.flavor", spec))
        allowed = OPTIONS[self.flavor]
        options = tuple(pick(Option, o, "wire.setting.option", spec, allowed, flavor=self.flavor) for o in self.options)
        put(self, "options", options)
        self.check_head(spec)
        self.check_options(spec)
        if self.model is not None and not self.model:
            raise SettingError(t("wire.setting.model", spec=spec))

    def check_head(self, spec: str) -> None:
        """The words after the flavor: FSDP1's strategy and prefetch, FSDP2's word; the strategy the others imply."""
        put = object.__setattr__
        stray = [
            w for w, own in ((self.prefetch, Flavor.FSDP1), (self.fsdp2, Flavor.FSDP2)) if w and self.flavor != own
        ]
        if stray or (self.flavor is Flavor.PLAIN and self.strategy is not None):
            word = str(stray[0] if stray else self.strategy)
            raise refuse("wire.setting.option", spec, word, OPTIONS[self.flavor], flavor=self.flavor)
        if self.flavor is Flavor.FSDP1:
            put(self, "strategy", pick(Strategy, self.strategy, "wire.setting.strategy", spec, FSDP1_STRATEGIES))
            if self.prefetch is not None:
                put(self, "prefetch", pick(Prefetch, self.prefetch, "wire.setting.prefetch", spec))
        elif self.flavor is Flavor.FSDP2:
            put(self, "fsdp2", pick(Fsdp2, self.fsdp2, "wire.setting.fsdp2", spec))
            self.agree(self.fsdp2.strategy, spec)  # type: ignore[union-attr]
        elif self.flavor is Flavor.DDP:
            self.agree(Strategy.DDP, spec)

    def agree(self, strategy: Strategy, spec: str) -> None:
        """Fill the strategy the flavor implies; one written that differs is refused."""
        if self.strategy is not None and Strategy(self.strategy) is not strategy:
            raise refuse("wire.setting.option", spec, str(self.strategy), OPTIONS[self.flavor], flavor=self.flavor)
        object.__setattr__(self, "strategy", strategy)

    def check_options(self, spec: str) -> None:
        """Each option once, and the backward prefetch given once (a word, or ``post`` / ``noprefetch``)."""
        for i, option in enumerate(self.options):
            if option in self.options[:i]:
                raise SettingError(t("wire.setting.twice", spec=spec, word=option.value))
        prefetches = [str(self.prefetch)] * (self.prefetch is not None) + [
            o.value for o in self.options if o in SHORT_PREFETCH
        ]
        if len(prefetches) > 1:
            raise SettingError(t("wire.setting.prefetch_twice", spec=spec, first=prefetches[0], second=prefetches[1]))

    # -- the string form ---------------------------------------------------------------------------

    @classmethod
    def parse(cls, spec: str) -> Setting:
        """``"fsdp1:FULL_SHARD:BACKWARD_PRE"`` as a ``Setting``; ``SettingError`` names a word that is wrong."""
        text, at, model = str(spec).partition("@")
        flavor, *words = text.split(":")
        flavor = pick(Flavor, flavor, "wire.setting.flavor", spec)
        fields: dict[str, object] = {}
        if flavor is Flavor.FSDP1:
            fields["strategy"] = words.pop(0) if words else ""
            if words and words[0] not in Option.choices():  # the third word, when no option: the prefetch
                fields["prefetch"] = words.pop(0)
        elif flavor is Flavor.FSDP2:
            fields["fsdp2"] = words.pop(0) if words else ""
        return cls(flavor, options=tuple(words), model=model if at else None, **fields)  # type: ignore[arg-type]

    def written(self) -> str:
        """The string form of the fields as given (before they are checked): what an error quotes."""
        strategy = self.strategy if self.flavor == Flavor.FSDP1 else None  # the others' is implied, not written
        words = [str(w) for w in (self.flavor, strategy, self.prefetch, self.fsdp2, *self.options) if w]
        return ":".join(words) + (f"@{self.model}" if self.model is not None else "")

    def __str__(self) -> str:
        return self.written()

    # -- what it means -----------------------------------------------------------------------------

    @property
    def backward_prefetch(self) -> Prefetch | None:
        """FSDP1's backward prefetch as it runs (``Prefetch.NONE``: none; default ``BACKWARD_PRE``); None
        for the other flavors."""
        if self.flavor is not Flavor.FSDP1:
            return None
        short = [SHORT_PREFETCH[o] for o in self.options if o in SHORT_PREFETCH]
        return self.prefetch or (short[0] if short else Prefetch.BACKWARD_PRE)

    @property
    def reshard_after_forward(self) -> bool | None:
        """Whether the gathered parameters are freed after forward; None when nothing is sharded by FSDP."""
        if self.flavor is Flavor.FSDP2:
            return self.fsdp2 is not Fsdp2.KEEP
        if self.flavor is Flavor.FSDP1:
            return self.strategy.reshards  # type: ignore[union-attr]
        return None

    @property
    def explicit(self) -> bool:
        """FSDP2's explicit prefetch with asynchronous unshards."""
        return self.fsdp2 is Fsdp2.EXPLICIT

    @property
    def bf16(self) -> bool:
        return Option.BF16 in self.options

    @property
    def sync(self) -> bool:
        return Option.SYNC in self.options

    @property
    def checkpointing(self) -> bool:
        return Option.AC in self.options

    @property
    def wrap(self) -> bool:
        """Per-block units (not ``nowrap``)."""
        return Option.NOWRAP not in self.options

    @property
    def forward_prefetch(self) -> bool:
        return Option.FWD in self.options

    @property
    def limit_all_gathers(self) -> bool:
        return Option.NOLIMIT not in self.options


def pick(
    kind: type[Word], word: object, key: str, spec: str, choices: tuple[Word, ...] | None = None, **fields: object
) -> Word:
    """``word`` as a member of ``kind`` (of ``choices`` when given), else the ``key`` error with the choices."""
    allowed = choices or tuple(kind)
    for member in allowed:
        if word == member.value:
            return member
    raise refuse(key, spec, str(word), tuple(m.value for m in allowed), **fields)
