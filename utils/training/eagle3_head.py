"""Stage 4a of an EAGLE-3 head: one Llama decoder layer (SpecForge names) over the main's fused state and next token.

At t it reads `fc` of the three tapped states and token t + 1's embedding (RMS-normalised, concatenated: q/k/v are
2 x hidden wide), predicts token t + 2 and feeds its own output back to draft further. Imports torch at the top.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from utils.training.scaffold import TrainingError


@dataclass(frozen=True)
class HeadShape:
    """The sizes of a head, read from the main's config plus the draft vocabulary and MLP width."""

    hidden_size: int
    target_hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    vocab_size: int
    draft_vocab_size: int
    max_position_embeddings: int = 8192

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise TrainingError(f"num_attention_heads {self.num_attention_heads} must be a multiple of "
                                f"num_key_value_heads {self.num_key_value_heads}.")
        if self.draft_vocab_size > self.vocab_size:
            raise TrainingError(f"draft_vocab_size {self.draft_vocab_size} exceeds vocab_size {self.vocab_size}.")


def shape_from_main_config(main_config: dict, draft_vocab_size: int, intermediate_size: int | None = None) -> HeadShape:
    """A head as wide as the main (hidden, heads, head_dim, rope), with its own MLP width and vocabulary."""
    hidden = int(main_config["hidden_size"])
    heads = int(main_config["num_attention_heads"])
    rope = main_config.get("rope_parameters") or {}
    theta = float(rope.get("rope_theta", main_config.get("rope_theta", 10000.0)))
    return HeadShape(hidden_size=hidden, target_hidden_size=hidden,
                     intermediate_size=int(intermediate_size or main_config["intermediate_size"]),
                     num_attention_heads=heads,
                     num_key_value_heads=int(main_config.get("num_key_value_heads", heads)),
                     head_dim=int(main_config.get("head_dim") or hidden // heads),
                     rms_norm_eps=float(main_config.get("rms_norm_eps", 1e-6)), rope_theta=theta,
                     vocab_size=int(main_config["vocab_size"]), draft_vocab_size=int(draft_vocab_size),
                     max_position_embeddings=int(main_config.get("max_position_embeddings", 8192)))


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class Attention(nn.Module):
    """q/k/v over 2 x hidden (embedding ++ hidden state), o back to hidden."""

    def __init__(self, shape: HeadShape) -> None:
        super().__init__()
        wide = 2 * shape.hidden_size
        self.heads, self.kv_heads, self.head_dim = shape.num_attention_heads, shape.num_key_value_heads, shape.head_dim
        self.q_proj = nn.Linear(wide, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(wide, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(wide, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, shape.hidden_size, bias=False)


class MLP(nn.Module):
    def __init__(self, shape: HeadShape) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(shape.hidden_size, shape.intermediate_size, bias=False)
        self.up_proj = nn.Linear(shape.hidden_size, shape.intermediate_size, bias=False)
        self.down_proj = nn.Linear(shape.intermediate_size, shape.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MidLayer(nn.Module):
    """The single decoder layer (named `midlayer` in the SpecForge layout)."""

    def __init__(self, shape: HeadShape) -> None:
        super().__init__()
        self.self_attn = Attention(shape)
        self.mlp = MLP(shape)
        self.input_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.hidden_norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary position embedding of x [B, H, T, d] at integer `positions` [T] (Llama's half-split layout)."""
    dim = x.shape[-1]
    inverse = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    angles = positions.to(torch.float32)[:, None] * inverse[None, :]
    angles = torch.cat((angles, angles), dim=-1)
    return x * angles.cos() + rotate_half(x) * angles.sin()


class Eagle3Head(nn.Module):
    """The head, trainable with a training-time unroll (`unrolled_logits`)."""

    d2t: torch.Tensor  # buffers (registered in __init__): the draft vocabulary's maps
    t2d: torch.Tensor

    def __init__(self, shape: HeadShape) -> None:
        super().__init__()
        self.shape = shape
        self.embed_tokens = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.embed_tokens.weight.requires_grad_(False)  # the main's embedding, frozen (GenAI copies it anyway)
        self.midlayer = MidLayer(shape)
        self.fc = nn.Linear(3 * shape.target_hidden_size, shape.hidden_size, bias=False)
        self.norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.lm_head = nn.Linear(shape.hidden_size, shape.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(shape.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(shape.vocab_size, dtype=torch.bool))
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02)

    def parameter_count(self, with_embedding: bool = False) -> int:
        return sum(p.numel() for name, p in self.named_parameters()
                   if with_embedding or not name.startswith("embed_tokens"))

    def _project(self, embedded: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        attn = self.midlayer.self_attn
        x = torch.cat((self.midlayer.input_layernorm(embedded), self.midlayer.hidden_norm(hidden)), dim=-1)
        batch, length, _ = x.shape
        q = attn.q_proj(x).view(batch, length, attn.heads, attn.head_dim).transpose(1, 2)
        k = attn.k_proj(x).view(batch, length, attn.kv_heads, attn.head_dim).transpose(1, 2)
        v = attn.v_proj(x).view(batch, length, attn.kv_heads, attn.head_dim).transpose(1, 2)
        q, k = rope(q, positions, self.shape.rope_theta), rope(k, positions, self.shape.rope_theta)
        repeat = attn.heads // attn.kv_heads
        return q, k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)

    def unrolled_logits(self, fused: torch.Tensor, next_tokens: torch.Tensor, steps: int) -> list[torch.Tensor]:
        """Logits ([B, T, draft_vocab]) of every unroll step, in parallel: token t + 1 + j is step j's input at t.
        Step j's query (rope position t + j) sees step 0's keys at positions <= t and steps 1..j's keys at t, as the
        chain does at inference. `fused`: [B, T, 3 x target_hidden]; `next_tokens`: [B, T + steps - 1]."""
        batch, length, _ = fused.shape
        if next_tokens.shape[1] < length + steps - 1:
            raise TrainingError(f"next_tokens needs {length + steps - 1} columns for {steps} steps over {length} "
                                f"positions, got {next_tokens.shape[1]}.")
        attn = self.midlayer.self_attn
        scale = 1.0 / math.sqrt(attn.head_dim)
        base = torch.arange(length)
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        hidden = self.fc(fused)
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        outputs = []
        for step in range(steps):
            embedded = self.embed_tokens(next_tokens[:, step:step + length])
            q, k, v = self._project(embedded, hidden, base + step)
            if step == 0:
                scores = (q @ k.transpose(-1, -2)) * scale
                scores = scores.masked_fill(~causal, float("-inf"))
                keys, values = [k], [v]
                probabilities = scores.softmax(dim=-1)
                mixed = probabilities @ v
            else:
                keys.append(k)
                values.append(v)
                main_scores = (q @ keys[0].transpose(-1, -2)) * scale
                main_scores = main_scores.masked_fill(~causal, float("-inf"))
                diagonal = torch.stack([(q * key).sum(-1) * scale for key in keys[1:]], dim=-1)
                probabilities = torch.cat((main_scores, diagonal), dim=-1).softmax(dim=-1)
                mixed = probabilities[..., :length] @ values[0]
                mixed = mixed + (probabilities[..., length:].unsqueeze(-1)
                                 * torch.stack(values[1:], dim=-2)).sum(-2)
            mixed = mixed.transpose(1, 2).reshape(batch, length, attn.heads * attn.head_dim)
            out = hidden + attn.o_proj(mixed)
            out = out + self.midlayer.mlp(self.midlayer.post_attention_layernorm(out))
            outputs.append(self.lm_head(self.norm(out)))
            hidden = out  # the next step reads the layer's own output, before `norm`, as GenAI feeds it
        return outputs


def load_main_output_layer(main_hf_dir: Any, main_config: dict) -> torch.Tensor | None:
    """The main's own output layer `lm_head.weight` [vocab, hidden] when it is not tied to the embedding, else None."""
    from pathlib import Path

    from safetensors import safe_open

    if main_config.get("tie_word_embeddings", True):
        return None
    folder = Path(main_hf_dir)
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            if "lm_head.weight" in handle.keys():
                return handle.get_tensor("lm_head.weight").float()
    raise TrainingError(f"{folder}'s config unties lm_head from the embedding, but no safetensors file holds "
                        "lm_head.weight: rebuild the folder.")


def load_main_embedding(main_hf_dir: Any) -> torch.Tensor:
    """The main's input embedding [vocab, hidden] from its safetensors file."""
    from pathlib import Path

    from safetensors import safe_open

    folder = Path(main_hf_dir)
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            for key in handle.keys():
                if key.endswith("embed_tokens.weight"):
                    return handle.get_tensor(key).float()
    raise TrainingError(f"No embed_tokens.weight in the safetensors files of {folder}.")
