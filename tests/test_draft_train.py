"""Fast tests for utils.training.draft_model and utils.training.draft_train: tiny models and synthetic data, no real model needed."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_standins import VOCAB, pattern_data, tiny_main_config, tiny_settings  # noqa: E402

from utils.models.atomic_folder import atomic_folder, read_marker  # noqa: E402
from utils.training import draft_model as dm  # noqa: E402
from utils.training import draft_settings as ds  # noqa: E402
from utils.training import draft_train as dtr  # noqa: E402
from utils.training import scaffold  # noqa: E402
from utils.training.scaffold import save_samples  # noqa: E402


def local_ids(kept: torch.Tensor) -> torch.Tensor:
    local = torch.full((VOCAB,), -1, dtype=torch.int64)
    local[kept] = torch.arange(len(kept))
    return local


def test_projected_embeddings_keep_dot_products_better_than_a_random_projection() -> None:
    torch.manual_seed(0)
    main = torch.randn(VOCAB, 16) @ torch.diag(torch.linspace(3, 0.1, 16))
    projected = dm.projected_embeddings(main, 4)
    assert projected.shape == (VOCAB, 4)
    random_basis, _ = torch.linalg.qr(torch.randn(16, 4))
    gram = main @ main.T
    error_projected = (gram - projected @ projected.T).norm()
    error_random = (gram - (main @ random_basis) @ (main @ random_basis).T).norm()
    assert error_projected < error_random
    assert torch.equal(dm.projected_embeddings(main, 16), main)
    with pytest.raises(ds.TrainingError, match="wider"):
        dm.projected_embeddings(main, 32)


def test_tiny_draft_shares_vocabulary_and_special_tokens_with_the_main() -> None:
    config = tiny_main_config()
    settings = tiny_settings()
    initial = dm.projected_embeddings(torch.randn(VOCAB, 16), settings.hidden_size)
    kept = torch.tensor([2, 5, 9, 20])
    compact = dm.build_draft(config, initial, settings, kept)
    assert compact.config.vocab_size == 4
    assert torch.equal(compact.get_input_embeddings().weight, initial[kept])
    assert compact.get_output_embeddings().weight.data_ptr() == compact.get_input_embeddings().weight.data_ptr()
    with torch.no_grad():
        compact.get_input_embeddings().weight.add_(1.0)  # pretend training changed the used rows
    up_proj = compact.model.layers[0].mlp.up_proj.weight.clone()
    full = dm.expand_vocabulary(compact, kept, initial, settings)
    assert full.config.vocab_size == VOCAB and not full.training
    assert (full.config.bos_token_id, full.config.eos_token_id, full.config.pad_token_id) == (1, 2, 2)
    weights = full.get_input_embeddings().weight
    assert torch.allclose(weights[kept], initial[kept] + 1.0)
    unused = torch.tensor([0, 1, 3, 39])
    assert torch.allclose(weights[unused], initial[unused] * settings.unused_token_scale)
    assert full.get_output_embeddings().weight.data_ptr() == weights.data_ptr()
    assert torch.equal(full.model.layers[0].mlp.up_proj.weight, up_proj)


def test_batch_scores_only_main_written_tokens_with_aligned_teacher() -> None:
    data = pattern_data(4, with_teacher=True)
    kept = dm.data_vocabulary(data, VOCAB)
    local = local_ids(kept)
    batch = dtr.draft_batch(data, [0, 1], local)
    scored = batch["labels"] >= 0
    for row, index in enumerate([0, 1]):
        tokens = data.samples[index].token_ids
        columns = scored[row].nonzero().flatten()
        assert columns[0] == data.samples[index].loss_start - 1 and columns[-1] == len(tokens) - 2
        assert kept[batch["labels"][row][scored[row]]].tolist() == tokens[data.samples[index].loss_start:]
    # the teacher's first choice was written as "the next token" at every position
    assert torch.equal(batch["teacher_ids"][..., 0][scored], batch["labels"][scored])
    answers = dtr.draft_batch(data, [0], local, answers_only=True)
    assert kept[answers["labels"][answers["labels"] >= 0]].tolist() == data.samples[0].token_ids[
        data.samples[0].answer_start:]


def test_distillation_ignores_teacher_tokens_outside_the_drafts_vocabulary() -> None:
    data = pattern_data(2, with_teacher=True)
    for ids in data.teacher_ids:
        ids[:, 1] = 39  # the teacher's second choice: a token the data never uses
    kept = dm.data_vocabulary(data, VOCAB)
    batch = dtr.draft_batch(data, [0, 1], local_ids(kept))
    assert (batch["teacher_ids"][..., 1][batch["labels"] >= 0] == -1).all()  # token 39 is not in the draft
    draft = dm.build_draft(tiny_main_config(), torch.randn(VOCAB, 8), tiny_settings(), kept)
    loss = dtr.draft_loss(draft, batch, 0.5)
    assert torch.isfinite(loss)


def test_a_few_training_steps_decrease_the_loss_and_raise_agreement() -> None:
    data = pattern_data(16, with_teacher=True)
    settings = tiny_settings(hidden_size=16, teacher_top_k=2, distill_weight=0.5, epochs=40.0)
    kept = dm.data_vocabulary(data, VOCAB)
    local = local_ids(kept)
    initial = dm.projected_embeddings(torch.randn(VOCAB, 16) * 0.1, settings.hidden_size)
    draft = dm.build_draft(tiny_main_config(), initial, settings, kept)
    everything = range(len(data.samples))
    before = dtr.greedy_agreement(draft, data, everything, local)
    history = dtr.train_draft(draft, data, local, settings, train=range(2, 16), held_out=[0, 1], show_progress=False)
    first, last = np.mean(history.loss[:5]), np.mean(history.loss[-5:])
    assert last < 0.5 * first
    assert history.evaluations[-1]["agreement"] > max(before, 0.5)
    assert len(history.steps) == history.total_steps and history.tokens_seen > 0


def test_split_keeps_all_answers_to_a_prompt_together() -> None:
    data = pattern_data(20)
    train, held_out = dtr.split_by_prompt(data, 0.2, seed=0)
    assert sorted(train + held_out) == list(range(20)) and held_out
    held_prompts = {data.samples[i].user_text for i in held_out}
    assert not held_prompts & {data.samples[i].user_text for i in train}


def test_a_finished_draft_is_reused_and_retrained_only_when_its_recipe_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    main = ds.MainModel(tmp_path / "tiny-instruct-ov", tmp_path / "tiny-instruct-hf")
    with atomic_folder(main.hf, {"main": 1}) as work:
        transformers.LlamaForCausalLM(tiny_main_config()).save_pretrained(work)
        (work / "tokenizer.json").write_text("{}")
        (work / "tokenizer_config.json").write_text("{}")
    settings = tiny_settings(epochs=2.0)
    with atomic_folder(ds.draft_folders(settings, main).data, {"data": 1}) as work:
        data = pattern_data(8)
        save_samples(data.samples, work, data.stats)

    calls = []
    real_train = dtr.train_draft

    def counting_train(*args, **kwargs):
        calls.append(1)
        return real_train(*args, **kwargs)

    monkeypatch.setattr(dtr, "train_draft", counting_train)
    folder = dtr.prepare_trained_draft(settings, main, show_progress=False)
    assert folder == tmp_path / "tiny-selfdraft-tiny-hf"
    assert len(calls) == 1 and (folder / "model.safetensors").exists() and (folder / "tokenizer.json").exists()
    assert json.loads((folder / dtr.VOCABULARY_FILE).read_text()) == dm.data_vocabulary(data, VOCAB).tolist()
    history = dtr.load_history(folder)
    assert history.steps and 0 <= history.details["final_agreement"] <= 1
    assert transformers.AutoModelForCausalLM.from_pretrained(folder).config.vocab_size == VOCAB
    recipe = read_marker(folder)["recipe"]
    assert recipe["settings"] == settings.draft_settings() and "torch" in recipe["versions"]

    assert dtr.prepare_trained_draft(settings, main, show_progress=False) == folder
    assert len(calls) == 1  # reused, not retrained
    dtr.prepare_trained_draft(tiny_settings(epochs=3.0), main, show_progress=False)
    assert len(calls) == 2  # a different recipe trains again

    real = scaffold.source_fingerprint  # an edit of the training code (not of its docstrings) trains again
    monkeypatch.setattr(scaffold, "source_fingerprint",
                        lambda source: real(source.replace("weight_decay=0.01", "weight_decay=0.02")))
    dtr.prepare_trained_draft(tiny_settings(epochs=3.0), main, show_progress=False)
    assert len(calls) == 3
