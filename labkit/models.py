"""The models the lessons train: a small GPT-style language model, and Llama-like
configurations of real sizes (1B to 70B) for estimates that never allocate them.

One ``TransformerBlock`` class per layer, so that ``transformer_auto_wrap_policy``
and FSDP2's per-block ``fully_shard`` have an obvious unit to wrap.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn


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


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.n_kv_heads = cfg.n_kv_heads or cfg.n_heads
        self.wq = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.kv_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.kv_dim, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        hd = d // self.n_heads
        q = self.wq(x).view(b, s, self.n_heads, hd).transpose(1, 2)
        k = self.wk(x).view(b, s, self.n_kv_heads, hd).transpose(1, 2)
        v = self.wv(x).view(b, s, self.n_kv_heads, hd).transpose(1, 2)
        if self.n_kv_heads != self.n_heads:  # each KV head serves n_heads / n_kv_heads query heads
            k = k.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)
            v = v.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, s, d))


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.hidden_ffn, bias=False)  # gate
        self.w3 = nn.Linear(cfg.dim, cfg.hidden_ffn, bias=False)  # up
        self.w2 = nn.Linear(cfg.hidden_ffn, cfg.dim, bias=False)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """One layer: the unit that a wrap policy turns into one FSDP unit."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim)
        self.ffn = FeedForward(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class TransformerLM(nn.Module):
    def __init__(self, cfg: ModelConfig | str = "small") -> None:
        super().__init__()
        cfg = get_config(cfg)
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.tied_embeddings:
            self.output.weight = self.tok_embeddings.weight
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Deterministic init given the torch seed; also used after meta-device construction."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)
            elif isinstance(m, RMSNorm):
                m.reset_parameters()
        for layer in self.layers:  # GPT-2's scaled init of residual projections
            nn.init.normal_(layer.attn.wo.weight, std=0.02 / math.sqrt(2 * self.cfg.n_layers))
            nn.init.normal_(layer.ffn.w2.weight, std=0.02 / math.sqrt(2 * self.cfg.n_layers))

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        logits = self.output(self.norm(h))
        if targets is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def synthetic_batch(
    cfg: ModelConfig, batch_size: int, step: int, rank: int = 0, device: str | torch.device = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """A deterministic batch of tokens that has something to learn (a repeating pattern with noise).

    Made here, not downloaded: the kit runs with no network. Different ranks get different data,
    as in data-parallel training.
    """
    g = torch.Generator().manual_seed(1000 * step + rank)
    period = 7
    base = torch.randint(0, cfg.vocab_size, (batch_size, period), generator=g)
    seq = base.repeat(1, cfg.seq_len // period + 2)[:, : cfg.seq_len + 1]
    noise = torch.rand(seq.shape, generator=g) < 0.1
    seq = torch.where(noise, torch.randint(0, cfg.vocab_size, seq.shape, generator=g), seq)
    seq = seq.to(device)
    return seq[:, :-1], seq[:, 1:]
