"""Tests of utils.tuning.concurrency: several requests at once (real offline pair) and batch exactness."""
from __future__ import annotations

import pytest

from utils.decoding.generation import DecodingSettings
from utils.decoding.pipelines import SpeculationSetupError
from utils.decoding.prompts import select_prompts
from utils.models.model_catalogue import get_pair
from utils.tuning.concurrency import batch_exactness, measure_concurrency
from utils.tuning.pipeline_pool import PipelinePool
from utils.tuning.sweeps import sweep_prompts

OFFLINE = get_pair("offline")


def test_concurrency_refuses_bad_input(fake_pair) -> None:
    speculative = DecodingSettings("speculative", num_assistant_tokens=2, max_new_tokens=4)
    with pytest.raises(SpeculationSetupError):
        measure_concurrency(fake_pair, [1], ["Hi"], DecodingSettings("plain", max_new_tokens=4), progress=False)
    for bad in ([], [0, 1]):
        with pytest.raises(ValueError, match="concurrencies"):
            measure_concurrency(fake_pair, bad, ["Hi"], speculative, progress=False)


def test_concurrent_requests_are_measured_side_by_side(offline_pair) -> None:
    pool = PipelinePool(OFFLINE)
    prompts = select_prompts(tasks=["code"], length="short", per_task=1)
    settings = DecodingSettings("speculative", num_assistant_tokens=2, max_new_tokens=8)
    load = measure_concurrency(OFFLINE, [2, 1], prompts, settings, repeats=1, pool=pool, progress=False)
    assert [(r["concurrency"], r["mode"]) for r in load] == [(1, "plain"), (1, "speculative"), (2, "plain"),
                                                             (2, "speculative")]
    assert all(r["identical_to_plain"] for r in load)
    assert load[2]["generated_tokens"] == 2 * load[0]["generated_tokens"]
    for row in load:
        assert row["tokens_per_second"] == pytest.approx(row["generated_tokens"] / row["latency_seconds"])
    assert [r["throughput_vs_plain"] for r in load if r["mode"] == "plain"] == [1.0, 1.0]
    pool.release()


def test_batch_exactness_refuses_bad_input(offline_pair) -> None:
    speculative = DecodingSettings("speculative", num_assistant_tokens=2, max_new_tokens=4)
    with pytest.raises(SpeculationSetupError):
        batch_exactness(OFFLINE, ["Hi"], 2, DecodingSettings("plain", max_new_tokens=4), progress=False)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="requests"):
            batch_exactness(OFFLINE, ["Hi"], bad, speculative, progress=False)
    with pytest.raises(ValueError, match="prompt"):
        batch_exactness(OFFLINE, [], 2, speculative, progress=False)
    with pytest.raises(ValueError, match="token budget"):
        batch_exactness(OFFLINE, ["Hi"], 2, speculative, token_budgets=[], progress=False)


def test_a_large_token_budget_keeps_a_speculative_batch_exact(offline_pair) -> None:
    # The workaround notebook 05 recommends: with every prompt of the batch prefilled in one step, each of 8
    # concurrent speculative requests must equal plain greedy decoding of its prompt alone (f32).
    prompts = sweep_prompts(long_prompts=0)
    settings = DecodingSettings("speculative", num_assistant_tokens=3, max_new_tokens=12)
    [row] = batch_exactness(OFFLINE, prompts, 8, settings, token_budgets=[4096], progress=False)
    assert row["max_num_batched_tokens"] == 4096 and row["requests"] == 8
    assert row["plain batch = alone"] == 8
    assert row["speculative batch = alone"] == 8 and row["differing requests"] == []
