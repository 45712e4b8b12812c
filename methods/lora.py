"""Low-rank adaptation of a tail's linear layers, one term per step (Hu et al., arXiv 2106.09685; as Happy++'s code
uses it, docs/methods.md#happy-tpami26):

    y = W x + b + Σ_k s·B_k A_k x,     A_k: r × in,  B_k: out × r,  s = α/r (1 without α)

A step adds a term k to every linear layer of the module; W, b and the earlier terms are frozen from then on and only
the newest term trains. A_k starts Kaiming-uniform (a = √5, as torch's own linear weights) from the step's generator,
B_k at zero, so a new term changes nothing until it trains. A layer's other parameters (a block's norms) are left as
they are.
"""
from __future__ import annotations

import math
from typing import Mapping

import torch
from torch import nn


class LoRATerm(nn.Module):
    """One term s·B A of a layer (module docstring)."""

    def __init__(self, in_features: int, out_features: int, rank: int, alpha: float | None,
                 gen: torch.Generator, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.empty(rank, in_features, dtype=dtype))
        nn.init.kaiming_uniform_(self.a, a=math.sqrt(5), generator=gen)  # drawn on the CPU: the same on any device
        self.a.data = self.a.data.to(device)
        self.b = nn.Parameter(torch.zeros(out_features, rank, dtype=dtype, device=device))
        self.scaling = 1.0 if alpha is None else alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.a.T @ self.b.T) * self.scaling


class LoRALinear(nn.Module):
    """A linear layer with its terms: `base` (W, b) and `terms`, summed (module docstring)."""

    def __init__(self, base: nn.Linear) -> None:
        super().__init__()
        self.base = base
        self.terms = nn.ModuleList()

    @property
    def weight(self) -> torch.Tensor:  # what reads a layer's weight (its dtype, its device) reads the base's
        return self.base.weight

    def add_term(self, rank: int, alpha: float | None, gen: torch.Generator) -> None:
        """A new term; the base and every earlier term frozen."""
        self.requires_grad_(False)
        w = self.base.weight
        self.terms.append(LoRATerm(self.base.in_features, self.base.out_features, rank, alpha, gen, w.dtype, w.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        for term in self.terms:
            out = out + term(x)
        return out


def add_lora(module: nn.Module, rank: int, alpha: float | None, gen: torch.Generator) -> int:
    """A new term on every linear layer of `module` (each wrapped in a `LoRALinear` the first time), in the order
    `named_modules` lists them; the number of layers."""
    if rank < 1:
        raise ValueError(f"a LoRA rank is a whole number >= 1, not {rank}")
    layers = []
    for name, child in list(module.named_modules()):
        if isinstance(child, LoRALinear):
            layers.append(child)
        elif isinstance(child, nn.Linear) and not name.endswith(".base"):
            wrapped = LoRALinear(child)
            parent, _, attr = name.rpartition(".")
            setattr(module.get_submodule(parent) if parent else module, attr, wrapped)
            layers.append(wrapped)
    for layer in layers:
        layer.add_term(rank, alpha, gen)
    return len(layers)


def freeze_linear(module: nn.Module) -> int:
    """Every linear layer of `module` frozen (weight and bias), what Happy++'s script does when it asks for LoRA (its
    terms are registered where its forward never reads them); the number of layers."""
    layers = [m for m in module.modules() if isinstance(m, (nn.Linear, LoRALinear))]
    for layer in layers:
        layer.requires_grad_(False)
    return len(layers)


def terms_in(state: Mapping[str, torch.Tensor]) -> int:
    """How many terms each layer of a module's state dict holds (0 without LoRA)."""
    indices = {int(key.split(".terms.")[1].split(".")[0]) for key in state if ".terms." in key}
    return max(indices) + 1 if indices else 0
