"""Stage 2a of notebook 06's draft: a small Llama with the main's vocabulary, special tokens and rope.

It starts from the main's projected embeddings and trains over the data's tokens only (`expand_vocabulary` after).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from utils.training.draft_settings import DraftTrainingSettings
from utils.training.scaffold import TrainingError

if TYPE_CHECKING:
    from utils.training.draft_data import TrainingData


def projected_embeddings(main_embeddings: Any, hidden_size: int) -> Any:
    """The main's embeddings [vocab, d] projected onto their top `hidden_size` right-singular vectors.
    This best preserves dot products between rows (what a tied output layer computes); hidden_size == d copies."""
    import torch

    embeddings = main_embeddings.detach().float()
    width = embeddings.shape[1]
    if hidden_size > width:
        raise TrainingError(f"A draft wider than its main model ({hidden_size} > {width}) cannot be "
                            "initialised by projection; choose hidden_size <= the main's.")
    if hidden_size == width:
        return embeddings.clone()
    _, vectors = torch.linalg.eigh(embeddings.T @ embeddings)  # ascending eigenvalues
    projection = vectors[:, -hidden_size:].flip(-1)  # [d, hidden], strongest direction first
    return embeddings @ projection


@dataclass
class VocabularySubset:
    """The tokens the data uses (the compact draft's softmax covers only these).
    `global_ids` (sorted) maps local index -> token id; `local_index` token id -> local index, -1 outside."""

    global_ids: Any  # int64 tensor [subset]
    local_index: Any  # int64 tensor [vocab]

    @classmethod
    def from_token_ids(cls, token_ids: Any, vocab_size: int) -> VocabularySubset:
        import torch

        ids = torch.unique(torch.as_tensor(token_ids, dtype=torch.int64).flatten())
        if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
            raise TrainingError(f"Token ids must lie in [0, {vocab_size}); got {ids.min()}..{ids.max()}.")
        local = torch.full((vocab_size,), -1, dtype=torch.int64)
        local[ids] = torch.arange(ids.numel())
        return cls(ids, local)

    @classmethod
    def full(cls, vocab_size: int) -> VocabularySubset:
        import torch

        return cls.from_token_ids(torch.arange(vocab_size), vocab_size)

    @property
    def vocab_size(self) -> int:
        return int(self.local_index.numel())

    def __len__(self) -> int:
        return int(self.global_ids.numel())

    def to_local(self, token_ids: Any) -> Any:
        """Local indices of token ids that must all be in the subset."""
        local = self.local_index[token_ids]
        if (local < 0).any():
            raise TrainingError("A token outside the vocabulary subset was asked for.")
        return local

    def to_local_or_missing(self, token_ids: Any) -> Any:
        """Local indices, -1 where a token is outside the subset."""
        return self.local_index[token_ids]

    def to_global(self, local_ids: Any) -> Any:
        return self.global_ids[local_ids]


def data_vocabulary(data: TrainingData, vocab_size: int, restrict: bool = True) -> VocabularySubset:
    """Every token that occurs in the samples (or the whole vocabulary if `restrict` is False)."""
    import torch

    if not restrict:
        return VocabularySubset.full(vocab_size)
    return VocabularySubset.from_token_ids(torch.cat([torch.as_tensor(s.token_ids) for s in data.samples]),
                                           vocab_size)


def draft_config(main_config: Any, settings: DraftTrainingSettings, vocab_size: int | None = None) -> Any:
    """A Llama config for the draft: the main's vocabulary, special tokens and rope, the draft's own size."""
    from transformers import LlamaConfig

    rope = getattr(main_config, "rope_parameters", None) or {"rope_type": "default", "rope_theta": 100000.0}
    # transformers 5 declares the fields under @strict; mypy does not see them as __init__ arguments
    return LlamaConfig(  # type: ignore[call-arg]
        vocab_size=vocab_size or main_config.vocab_size, hidden_size=settings.hidden_size,
        intermediate_size=settings.intermediate_size, num_hidden_layers=settings.layers,
        num_attention_heads=settings.attention_heads, num_key_value_heads=settings.key_value_heads,
        head_dim=settings.hidden_size // settings.attention_heads,
        max_position_embeddings=min(int(main_config.max_position_embeddings), 2048),
        rms_norm_eps=main_config.rms_norm_eps, rope_parameters=dict(rope), tie_word_embeddings=True,
        bos_token_id=main_config.bos_token_id, eos_token_id=main_config.eos_token_id,
        pad_token_id=main_config.pad_token_id, hidden_act="silu", attention_bias=False, mlp_bias=False,
    )


def build_draft(main_config: Any, initial_embeddings: Any, settings: DraftTrainingSettings,
                subset: VocabularySubset | None = None) -> Any:
    """A new Llama draft whose tied embeddings start from `initial_embeddings`.
    With `subset` it is compact: only the subset's rows, token ids are local indices (see `expand_vocabulary`)."""
    import torch
    from transformers import LlamaForCausalLM

    if initial_embeddings.shape[1] != settings.hidden_size:
        raise TrainingError(f"Initial embeddings are {initial_embeddings.shape[1]} wide, the draft "
                            f"{settings.hidden_size}.")
    rows = initial_embeddings if subset is None else initial_embeddings[subset.global_ids]
    torch.manual_seed(settings.seed)
    draft = LlamaForCausalLM(draft_config(main_config, settings, vocab_size=rows.shape[0]))
    with torch.no_grad():
        # torch types .weight as Tensor | Module, so mypy sees .copy_ as uncallable
        draft.get_input_embeddings().weight.copy_(rows)  # type: ignore[operator]
        draft.model.norm.weight.fill_(settings.final_norm_init)
    draft.tie_weights()
    output_weights, input_weights = draft.get_output_embeddings().weight, draft.get_input_embeddings().weight
    if output_weights.data_ptr() != input_weights.data_ptr():  # type: ignore[operator]  # as above: Tensor | Module
        raise TrainingError("The draft's output layer is not tied to its embeddings.")
    return draft


def expand_vocabulary(compact: Any, subset: VocabularySubset, initial_embeddings: Any, main_config: Any,
                      settings: DraftTrainingSettings) -> Any:
    """The compact draft as a full-vocabulary model: trained rows go back to their token ids.
    Unused tokens keep their projected embedding x `settings.unused_token_scale`, so they rarely win the argmax."""
    from transformers import LlamaForCausalLM

    full = LlamaForCausalLM(draft_config(main_config, settings, vocab_size=subset.vocab_size))
    state = {key: value for key, value in compact.state_dict().items() if "embed_tokens" not in key
             and "lm_head" not in key}
    embeddings = initial_embeddings.detach().clone() * settings.unused_token_scale
    embeddings[subset.global_ids] = compact.get_input_embeddings().weight.detach()
    state["model.embed_tokens.weight"] = embeddings
    missing, unexpected = full.load_state_dict(state, strict=False)
    if unexpected or any("embed_tokens" not in key and "lm_head" not in key for key in missing):
        raise TrainingError(f"Expanding the draft lost weights: missing {missing}, unexpected {unexpected}.")
    full.tie_weights()
    full.eval()
    return full


def parameter_count(model: Any) -> int:
    """Number of distinct weights (tied matrices counted once)."""
    seen, total = set(), 0
    for parameter in model.parameters():
        if parameter.data_ptr() not in seen:
            seen.add(parameter.data_ptr())
            total += parameter.numel()
    return total
