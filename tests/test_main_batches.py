"""Fast tests for utils.training.scaffold (no model needed): batching by length, padded prefills, configs."""
from __future__ import annotations

import numpy as np
import pytest

from utils.training import scaffold as mb


def test_length_batches_respect_the_budget_and_keep_every_index_once() -> None:
    lengths = [5, 100, 7, 60, 3, 90, 200]
    batches = mb.length_batches(lengths, 120)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) == 1 or max(lengths[i] for i in batch) * len(batch) <= 120
    assert [200] in [[lengths[i] for i in batch] for batch in batches], "a sequence over the budget stands alone"


class RecordingRequest:
    """Stands for an OpenVINO infer request: records each prefill's inputs and whether its state was reset first."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.fresh = False

    def reset_state(self) -> None:
        self.fresh = True

    def infer(self, inputs: dict) -> None:
        assert self.fresh, "every prefill starts from a reset state"
        self.fresh = False
        self.calls.append({key: np.array(value) for key, value in inputs.items()})


def test_padded_prefills_pad_right_mask_and_number_positions() -> None:
    sequences = [[5, 6, 7], [8], [9, 10], [11, 12, 13, 14, 15, 16]]
    request = RecordingRequest()
    seen: list[list[int]] = []
    for batch in mb.padded_prefills(request, sequences, mb.length_batches([len(s) for s in sequences], 6)):
        call = request.calls[-1]  # the caller reads the request while its batch is current
        for row, index in enumerate(batch):
            size = len(sequences[index])
            assert call["input_ids"][row, :size].tolist() == sequences[index]
            assert call["attention_mask"][row].tolist() == [1] * size + [0] * (call["input_ids"].shape[1] - size)
            assert not call["input_ids"][row, size:].any()
        assert call["position_ids"].tolist() == [list(range(call["input_ids"].shape[1]))] * len(batch)
        assert call["beam_idx"].tolist() == list(range(len(batch)))
        seen += batch
    assert sorted(seen) == [0, 1, 2, 3]
    assert all(call["input_ids"].size <= 6 for call in request.calls)


def test_shuffled_length_batches_are_deterministic_and_prefilled_in_their_order() -> None:
    lengths = [1, 2, 3, 4, 5, 6, 7, 8]
    plain = mb.length_batches(lengths, 8)
    shuffled = mb.length_batches(lengths, 8, shuffle_seed=0)
    assert shuffled == mb.length_batches(lengths, 8, shuffle_seed=0) and shuffled != plain
    assert sorted(map(sorted, shuffled)) == sorted(map(sorted, plain))
    sequences = [[1] * n for n in lengths]
    assert list(mb.padded_prefills(RecordingRequest(), sequences, shuffled)) == shuffled


@pytest.mark.parametrize("temperature", [None, 0.8])
def test_generation_config_is_greedy_or_sampled_and_stops_at_the_end_token(temperature: float | None) -> None:
    config = mb.generation_config(end_id=2, max_new_tokens=17, temperature=temperature, seed=5)
    assert config.max_new_tokens == 17 and config.eos_token_id == 2 and set(config.stop_token_ids) == {2}
    assert config.do_sample is (temperature is not None)
    if temperature is not None:
        assert config.temperature == pytest.approx(0.8) and config.top_p == pytest.approx(mb.SAMPLING_TOP_P)
        assert config.rng_seed == 5
