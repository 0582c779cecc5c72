"""`eagle3_train.train_head` on tiny tapped data: the loss falls, the head learns what generalises, the frozen parts
stay frozen, a fixed seed repeats the run, and `answers_only` keeps the prompts' labels out of the loss."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from utils.training.eagle3_head import Eagle3Head, shape_from_main_config
from utils.training.eagle3_hidden import TappedData
from utils.training.eagle3_settings import Eagle3Settings
from utils.training.eagle3_train import evaluate_accuracy, init_from_main, split_samples, train_head
from utils.training.eagle3_vocab import draft_vocabulary

pytestmark = pytest.mark.standins  # trains heads

MAIN_CONFIG = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
               "intermediate_size": 64, "rms_norm_eps": 1e-5, "vocab_size": 50, "num_hidden_layers": 12,
               "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "eos_token_id": 2}
CYCLE = np.arange(10, 42, 2)  # the 16 ids the tiny "main" writes, in this order, round and round
LENGTH = 12
ANSWER_START = 4


def cycle_data(samples: int = 8, seed: int = 0) -> TappedData:
    """Sequences that walk along CYCLE from different starts; the main's greedy choice is always the next id.

    The fused state at a position is a fixed random vector of its token plus noise (a main's state says which token
    it read), so "after x comes the next id of the cycle" is learnable, and holds for the validation samples too.
    """
    rng = np.random.default_rng(seed)
    states = rng.standard_normal((MAIN_CONFIG["vocab_size"], 3 * MAIN_CONFIG["hidden_size"]))
    tokens, targets = [], []
    for sample in range(samples):
        walk = CYCLE[(sample * 5 + np.arange(LENGTH + 1)) % len(CYCLE)]
        tokens.append(walk[:-1])
        targets.append(walk[1:])
    positions = samples * LENGTH
    return TappedData(tokens=np.concatenate(tokens).astype(np.int32),
                      hidden=(states[np.concatenate(tokens)] + 0.1 * rng.standard_normal((positions, states.shape[1])))
                      .astype(np.float16),
                      targets=np.concatenate(targets).astype(np.int32),
                      offsets=np.arange(0, positions + 1, LENGTH, dtype=np.int64),
                      answer_starts=np.full(samples, ANSWER_START, dtype=np.int64))


def tiny_settings(**changes):
    base = dict(draft_vocab_size=len(CYCLE), intermediate_size=48, unroll_steps=2, epochs=20.0, batch_tokens=2 * LENGTH,
                learning_rate=1e-2, warmup_steps=2, validation_share=0.25, seed=3)
    return Eagle3Settings.preset("quick", **(base | changes))


def fresh_head(data: TappedData, settings):
    """A seeded head, initialised from a random "main" embedding as `eagle3_build` initialises a real one."""
    vocab = draft_vocabulary(data.targets, settings.draft_vocab_size, MAIN_CONFIG["vocab_size"])
    torch.manual_seed(0)
    head = Eagle3Head(shape_from_main_config(MAIN_CONFIG, settings.draft_vocab_size, settings.intermediate_size))
    embedding = torch.randn(MAIN_CONFIG["vocab_size"], MAIN_CONFIG["hidden_size"])
    init_from_main(head, embedding, vocab)
    return head, vocab, embedding


def test_training_lowers_the_loss_and_learns_what_generalises() -> None:
    data = cycle_data()
    settings = tiny_settings()
    head, vocab, embedding = fresh_head(data, settings)
    assert np.flatnonzero(vocab.t2d()).tolist() == CYCLE.tolist() and vocab.coverage == 1.0
    _, validation = split_samples(data.samples, settings.validation_share, settings.seed)
    before = evaluate_accuracy(head, data, validation, settings, vocab.target_to_draft())

    history = train_head(head, data, vocab, settings, show_progress=False)

    print(f"loss {history.loss[0]:.3f} -> {history.loss[-1]:.3f} in {len(history.loss)} steps")
    assert len(history.loss) > 10 and all(np.isfinite(history.loss))
    assert history.loss[-1] < 0.2 * history.loss[0]
    after = history.evaluations[-1]
    assert after == {"step": history.steps[-1], **evaluate_accuracy(head, data, validation, settings,
                                                                    vocab.target_to_draft())}
    print(f"validation chains: {before['answer_chain_accuracy']} -> {after['answer_chain_accuracy']}")
    assert after["answer_chain_accuracy"][0] > 0.9 > before["answer_chain_accuracy"][0]
    assert after["answer_chain_accuracy"][1] > 0.75 > before["answer_chain_accuracy"][1]
    # what GenAI replaces or reads as is must not have moved: the main's embedding and the vocabulary maps
    assert torch.equal(head.embed_tokens.weight, embedding)
    assert head.d2t.tolist() == vocab.d2t().tolist() and head.t2d.tolist() == vocab.t2d().tolist()


def test_a_fixed_seed_repeats_the_run() -> None:
    data = cycle_data()
    settings = tiny_settings(epochs=4.0)
    first = train_head(fresh_head(data, settings)[0], data, draft_vocabulary(data.targets, len(CYCLE), 50), settings,
                       show_progress=False)
    second = train_head(fresh_head(data, settings)[0], data, draft_vocabulary(data.targets, len(CYCLE), 50),
                        settings, show_progress=False)
    assert second.loss == pytest.approx(first.loss, rel=1e-5)
    other = train_head(fresh_head(data, settings)[0], data, draft_vocabulary(data.targets, len(CYCLE), 50),
                       tiny_settings(epochs=4.0, seed=4), show_progress=False)
    assert other.loss != pytest.approx(first.loss, rel=1e-5)  # the seed decides the split and the batch order


@pytest.mark.parametrize("answers_only", [True, False])
def test_answers_only_keeps_the_prompts_labels_out_of_the_loss(answers_only: bool) -> None:
    """Changing the main's choices inside the prompts changes nothing the loss sees - unless every position counts."""
    data = cycle_data()
    scrambled = cycle_data()
    rng = np.random.default_rng(1)
    for start in scrambled.offsets[:-1]:  # the choices at prompt positions (before each answer start)
        scrambled.targets[start:start + ANSWER_START] = rng.choice(CYCLE, ANSWER_START)
    assert (scrambled.targets != data.targets).any()
    settings = tiny_settings(epochs=3.0, answers_only=answers_only)
    vocab = draft_vocabulary(data.targets, len(CYCLE), MAIN_CONFIG["vocab_size"])
    plain = train_head(fresh_head(data, settings)[0], data, vocab, settings, show_progress=False)
    changed = train_head(fresh_head(data, settings)[0], scrambled, vocab, settings, show_progress=False)
    if answers_only:
        assert changed.loss == pytest.approx(plain.loss, rel=1e-5)
        assert ([v["answer_chain_accuracy"] for v in changed.evaluations]
                == [v["answer_chain_accuracy"] for v in plain.evaluations])
    else:
        assert changed.loss != pytest.approx(plain.loss, rel=1e-5)
