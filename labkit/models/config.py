"""The lessons' model sizes as plain numbers: no torch, so that formulas and estimates can use them.

``labkit.models.transformer`` builds a ``TransformerLM`` from one of these.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 1024
    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None  # grouped-query attention (Llama 2/3 70B); default n_heads
    ffn_dim: int | None = None  # default 4 * dim (GPT); Llama configs give their own
    seq_len: int = 64
    tied_embeddings: bool = False

    @property
    def kv_dim(self) -> int:
        return (self.n_kv_heads or self.n_heads) * (self.dim // self.n_heads)

    @property
    def hidden_ffn(self) -> int:
        return self.ffn_dim or 4 * self.dim

    def num_params(self) -> int:
        """Exact parameter count of ``TransformerLM(self)`` (checked by a test)."""
        d, f, v = self.dim, self.hidden_ffn, self.vocab_size
        attn = 2 * d * d + 2 * d * self.kv_dim  # q and out projections; k and v (GQA); no bias
        mlp = 3 * d * f  # gate, up, down (SwiGLU), no bias
        norms = 2 * d
        block = attn + mlp + norms
        embed = v * d
        head = 0 if self.tied_embeddings else v * d
        return self.n_layers * block + embed + head + d  # + final norm


# Sizes for the laptop: "tiny" trains in a second per step on 2 CPU cores.
# fmt: off
PRESETS: dict[str, ModelConfig] = {  # a table: one preset a line
    "tiny": ModelConfig(vocab_size=512, dim=64, n_layers=2, n_heads=4, seq_len=32),
    "small": ModelConfig(vocab_size=1024, dim=128, n_layers=4, n_heads=4, seq_len=64),
    "medium": ModelConfig(vocab_size=4096, dim=256, n_layers=6, n_heads=8, seq_len=128),
    "large": ModelConfig(vocab_size=8192, dim=512, n_layers=8, n_heads=8, seq_len=128),
    # Llama-like shapes (Llama 2 7B/13B, Llama 2 70B with 8 KV heads, a 1B sibling):
    # only ever built on the meta device or under FakeTensorMode.
    "llama-1b": ModelConfig(vocab_size=32000, dim=2048, n_layers=16, n_heads=32, ffn_dim=8192, seq_len=2048),
    "llama-7b": ModelConfig(vocab_size=32000, dim=4096, n_layers=32, n_heads=32, ffn_dim=11008, seq_len=4096),
    "llama-13b": ModelConfig(vocab_size=32000, dim=5120, n_layers=40, n_heads=40, ffn_dim=13824, seq_len=4096),
    "llama-70b": ModelConfig(vocab_size=32000, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim=28672, seq_len=4096),
}
# fmt: on


def get_config(name_or_config: str | ModelConfig) -> ModelConfig:
    if isinstance(name_or_config, ModelConfig):
        return name_or_config
    try:
        return PRESETS[name_or_config]
    except KeyError:
        raise ValueError(f"unknown model size {name_or_config!r}; choose one of {', '.join(PRESETS)}") from None
