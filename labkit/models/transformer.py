"""The models the lessons train: a small GPT-style language model, and Llama-like
configurations of real sizes (1B to 70B) for estimates that never allocate them.

One ``TransformerBlock`` class per layer, so that ``transformer_auto_wrap_policy``
and FSDP2's per-block ``fully_shard`` have an obvious unit to wrap.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from labkit.models.config import ModelConfig, get_config


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
