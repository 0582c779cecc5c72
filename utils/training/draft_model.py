"""Stage 2a of notebook 06's draft: a small Llama with the main's vocabulary, special tokens and rope.

It starts from the main's projected embeddings and trains over the data's tokens only (`build_draft` with `kept`);
`expand_vocabulary` then puts the trained rows back at their token ids.
"""
from __future__ import annotations

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
    return embeddings @ vectors[:, -hidden_size:].flip(-1)  # strongest direction first


def data_vocabulary(data: TrainingData, vocab_size: int, restrict: bool = True) -> Any:
    """The sorted token ids the samples use (every id if not `restrict`): the compact draft's vocabulary."""
    import torch

    if not restrict:
        return torch.arange(vocab_size)
    return torch.unique(torch.cat([torch.as_tensor(sample.token_ids) for sample in data.samples]))


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
                kept: Any = None) -> Any:
    """A new Llama draft whose tied embeddings start from `initial_embeddings`.
    With `kept` (token ids) it is compact: only their rows, its ids are positions in `kept` (`expand_vocabulary`)."""
    import torch
    from transformers import LlamaForCausalLM

    if initial_embeddings.shape[1] != settings.hidden_size:
        raise TrainingError(f"Initial embeddings are {initial_embeddings.shape[1]} wide, the draft "
                            f"{settings.hidden_size}.")
    rows = initial_embeddings if kept is None else initial_embeddings[kept]
    torch.manual_seed(settings.seed)
    draft = LlamaForCausalLM(draft_config(main_config, settings, vocab_size=rows.shape[0]))
    with torch.no_grad():
        # torch types .weight as Tensor | Module, so mypy sees .copy_ as uncallable
        draft.get_input_embeddings().weight.copy_(rows)  # type: ignore[operator]
        draft.model.norm.weight.fill_(settings.final_norm_init)
    return draft


def expand_vocabulary(compact: Any, kept: Any, initial_embeddings: Any, settings: DraftTrainingSettings) -> Any:
    """The compact draft, in place, as a full-vocabulary model: trained rows go back to their token ids `kept`.
    Unused tokens keep their projected embedding x `settings.unused_token_scale`, so they rarely win the argmax."""
    import torch

    embeddings = initial_embeddings.detach().clone() * settings.unused_token_scale
    embeddings[kept] = compact.get_input_embeddings().weight.detach()
    compact.resize_token_embeddings(len(embeddings), mean_resizing=False)  # the tied output layer follows
    with torch.no_grad():
        compact.get_input_embeddings().weight.copy_(embeddings)
    return compact.eval()
