"""Tests of utils.tuning.sweeps: sweep points, grids, summaries, the sweep runner (fake and real models), step times."""
from __future__ import annotations

import dataclasses

import pytest
from fake_sweeps import PROMPTS, fake_records, fake_sweep, record

from utils.decoding.generation import DecodingSettings
from utils.decoding.prompts import select_prompts
from utils.decoding.speedup_model import expected_tokens_per_pass
from utils.models.model_catalogue import ModelPair, ModelSpec, get_pair
from utils.tuning import sweeps
from utils.tuning.pipeline_pool import PipelinePool, PipelineSpec


def fake_measure(calls: list):
    """A stand-in for `sweeps.measure_points` that logs which points were measured together."""
    def measure(pool, points, prompts, *, warmup=1, repeats=2, progress=True):
        calls.append([point.value for point in points])
        return [fake_records(point, prompts) for point in points]
    return measure


# --------------------------------------------------------------------------- the runner (fake models)


def test_run_sweep_measures_every_point_grouped_by_pipeline(fake_pair: ModelPair,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(sweeps, "measure_points", fake_measure(calls))
    int8 = PipelineSpec(draft_variant="int8")
    mixed = sweeps.k_points([1, 2, 3]) + sweeps.k_points([2], pipeline=int8) + sweeps.k_points([5], max_new_tokens=8)
    result = sweeps.run_sweep(fake_pair, mixed, PROMPTS, progress=False)
    assert calls == [[1, 2, 3], [2], [5]]  # one pipeline's points together (plain timed once), then the others
    assert [point.point.value for point in result.points] == [1, 2, 3, 2, 5]  # the order asked for
    sweeps.run_sweep(fake_pair, sweeps.k_points([2]), PROMPTS, progress=False)
    assert calls[-1] == [2]  # a second sweep measures again: nothing is reused from an earlier run


def test_sweep_rows_group_by_task_length_and_prompt(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweeps, "measure_points", fake_measure([]))
    result = sweeps.run_sweep(fake_pair, sweeps.k_points([2, 4]), PROMPTS,
                              progress=False)
    by_task = result.rows(by="task")
    assert {(row["value"], row["group"]) for row in by_task} == {(k, t) for k in (2, 4)
                                                                  for t in ("code", "chat", "summarisation")}
    by_length = {(row["value"], row["group"]): row for row in result.rows(by="length")}
    assert by_length[(2, "short")]["prompts"] == 2 and by_length[(2, "long")]["prompts"] == 1
    overall = {row["value"]: row for row in result.rows()}
    assert overall[4]["speedup"] == pytest.approx(1.4)
    assert overall[4]["acceptance_rate"] == pytest.approx(0.5)
    assert overall[4]["tokens_per_pass"] == 5  # the prefill pass and the last pass are left out
    assert overall[4]["per_token_acceptance"] == pytest.approx(1.0, abs=1e-6)
    assert result.best()["all"]["value"] == 4
    assert result.speedup_by_value(prompt_ids=["c1"]) == pytest.approx({2: 1.2, 4: 1.4})
    with pytest.raises(ValueError):
        result.rows(by="colour")


def test_best_picks_the_fastest_value_per_group() -> None:
    def speedup(point, prompt):  # long prompts gain most at K=2, short ones at K=4
        k = point.settings.num_assistant_tokens
        return {2: 1.5, 4: 1.1}[k] if prompt.length == "long" else 1 + 0.1 * k

    result = fake_sweep(sweeps.k_points([2, 4]), speedup)
    best = result.best(by="length")
    assert (best["long"]["value"], best["long"]["speedup"]) == (2, pytest.approx(1.5))
    assert (best["short"]["value"], best["short"]["speedup"]) == (4, pytest.approx(1.4))
    assert result.knob == "num_assistant_tokens"


def test_run_sweep_checks_model_folders_before_measuring(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(sweeps, "measure_points", fake_measure(calls))
    missing = dataclasses.replace(fake_pair, draft=ModelSpec("nowhere", "missing", 1e6, "int4"))
    with pytest.raises(ValueError, match="does not exist"):
        sweeps.run_sweep(missing, sweeps.k_points([1, 2]), PROMPTS, progress=False)
    assert calls == []
    with pytest.raises(ValueError, match="at least one point"):
        sweeps.run_sweep(fake_pair, [], PROMPTS, progress=False)
    with pytest.raises(ValueError, match="at least one prompt"):
        sweeps.run_sweep(fake_pair, sweeps.k_points([1]), [], progress=False)


def test_measure_points_refuses_points_it_cannot_time_together(fake_pair: ModelPair) -> None:
    mixed = sweeps.k_points([1]) + sweeps.k_points([2], pipeline=PipelineSpec(draft_variant="int8"))
    with pytest.raises(ValueError, match=r"the pool keeps \(2\)"):
        sweeps.measure_points(PipelinePool(fake_pair), mixed, PROMPTS)
    other_budget = sweeps.k_points([1]) + sweeps.k_points([2], max_new_tokens=8)
    with pytest.raises(ValueError, match="same plain reference"):
        sweeps.measure_points(PipelinePool(fake_pair, keep=3), other_budget, PROMPTS)
    other_reference = sweeps.k_points([1]) + sweeps.k_points([2], pipeline=PipelineSpec(cache_size_gb=1))
    with pytest.raises(ValueError, match="same plain reference"):
        sweeps.measure_points(PipelinePool(fake_pair, keep=3), other_reference, PROMPTS)
    assert sweeps.measure_points(PipelinePool(fake_pair), [], PROMPTS) == []


def test_points_sharing_a_plain_reference_are_timed_together_as_far_as_the_pool_allows() -> None:
    int8 = PipelineSpec(draft_variant="int8")
    points = (sweeps.k_points([1, 2]) + sweeps.prompt_lookup_points([3]) + sweeps.k_points([2], pipeline=int8)
              + sweeps.k_points([4]) + sweeps.k_points([5], max_new_tokens=8))
    # keep=2: the plain pipeline and one other at a time; same-pipeline points stay together, in order
    assert sweeps.group_points(points, keep=2) == [[0, 1, 4], [2], [3], [5]]
    # keep=3: two pipelines besides plain per run, so plain is timed twice instead of three times
    assert sweeps.group_points(points, keep=3) == [[0, 1, 4, 2], [3], [5]]
    assert sweeps.group_points(points, keep=4) == [[0, 1, 4, 2, 3], [5]]
    for keep in (2, 3, 4):
        for group in sweeps.group_points(points, keep=keep):
            assert len({points[index].pipeline for index in group}) <= max(keep - 1, 1)


def test_run_sweep_times_plain_once_for_a_draft_and_prompt_lookup_with_a_large_pool(
        fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(sweeps, "measure_points", fake_measure(calls))
    points = sweeps.k_points([2, 4]) + sweeps.prompt_lookup_points([3])
    result = sweeps.run_sweep(fake_pair, points, PROMPTS, pool=PipelinePool(fake_pair, keep=3), progress=False)
    assert calls == [[2, 4, 3]]
    assert [point.point.value for point in result.points] == [2, 4, 3]
    sweeps.run_sweep(fake_pair, points, PROMPTS, progress=False)
    assert calls[1:] == [[2, 4], [3]]  # the default pool (keep=2) cannot hold both


# --------------------------------------------------------------------------- points, prompts, grids, summaries


def test_point_factories() -> None:
    ks = sweeps.k_points([1, 5], max_new_tokens=20)
    assert [(p.knob, p.value, p.settings.num_assistant_tokens, p.settings.max_new_tokens) for p in ks] == [
        ("num_assistant_tokens", 1, 1, 20), ("num_assistant_tokens", 5, 5, 20)]
    thresholds = sweeps.threshold_points([0.3])
    assert thresholds[0].settings.assistant_confidence_threshold == 0.3
    assert thresholds[0].settings.num_assistant_tokens is None
    drafts = sweeps.draft_points([("int8", "bf16"), (None, "f32")], k=2)
    assert [p.value for p in drafts] == ["int8 @ bf16", "default @ f32"]
    assert drafts[0].pipeline.draft_precision == "bf16" and drafts[0].settings.num_assistant_tokens == 2


def test_plain_settings_keep_budget_and_sampling() -> None:
    settings = DecodingSettings("speculative", num_assistant_tokens=3, max_new_tokens=17, ignore_eos=True,
                                do_sample=True, temperature=0.7, top_p=0.9, rng_seed=5)
    plain = sweeps.plain_settings_for(settings)
    assert (plain.mode, plain.num_assistant_tokens, plain.max_new_tokens, plain.ignore_eos) == ("plain", None, 17, True)
    assert (plain.do_sample, plain.temperature, plain.top_p, plain.rng_seed) == (True, 0.7, 0.9, 5)





def test_summary_of_fabricated_records() -> None:
    steps = [1, 3, 2, 4, 1]
    records = [record(speedup_vs_plain=2.0, plain_wall_seconds=2.0, wall_seconds=1.0, tokens_per_step=steps, identical_to_plain=True,
                      accepted_tokens=6, draft_tokens=12),
               record(speedup_vs_plain=None, wall_seconds=5.0, tokens_per_step=[1, 2, 2], identical_to_plain=False,
                      accepted_tokens=2, draft_tokens=4)]
    summary = sweeps.summarise_records(records, draft_length=3)
    assert summary["speedup"] == 2.0  # only the comparable prompt counts
    assert summary["comparable_prompts"] == 1
    assert summary["tokens_per_pass"] == pytest.approx((3 + 2 + 4 + 2) / 4)  # prefill and last passes left out
    assert expected_tokens_per_pass(summary["per_token_acceptance"], 3) == pytest.approx(summary["tokens_per_pass"])
    assert summary["acceptance_rate"] == pytest.approx(8 / 16)  # pooled over the records
    assert summary["identical"] is False
    assert summary["max_tokens_per_pass"] == 4
    assert sweeps.summarise_records(records, draft_length=None)["per_token_acceptance"] is None


def test_summary_leaves_out_counters_genai_got_wrong() -> None:
    """GenAI now and then reports more accepted than drafted tokens: such a record's counters are not pooled."""
    records = [record(speedup_vs_plain=1.0, accepted_tokens=2, draft_tokens=0),
               record(speedup_vs_plain=1.0, accepted_tokens=3, draft_tokens=4)]
    assert sweeps.summarise_records(records, draft_length=2)["acceptance_rate"] == pytest.approx(3 / 4)


# --------------------------------------------------------------------------- real models (small)

OFFLINE = get_pair("offline")


def test_real_sweep_of_k_and_of_a_low_threshold(offline_pair) -> None:
    pool = PipelinePool(OFFLINE)
    prompts = select_prompts(tasks=["code"], length="short", per_task=1)
    result = sweeps.run_sweep(OFFLINE, sweeps.k_points([2], max_new_tokens=8), prompts, repeats=1, pool=pool,
                              progress=False)
    row = result.rows()[0]
    assert row["identical"] and row["speedup"] is not None and 0.0 <= row["acceptance_rate"] <= 1.0
    assert 1.0 <= row["tokens_per_pass"] <= 3.0

    # A low confidence threshold lets the draft propose several tokens per step (it needs token probabilities).
    low_threshold = sweeps.run_sweep(OFFLINE, sweeps.threshold_points([0.05], max_new_tokens=16), prompts, repeats=1,
                                     pool=pool, progress=False).rows()[0]
    assert low_threshold["identical"] and low_threshold["max_tokens_per_pass"] > 2
    pool.release()


def test_rows_carry_the_speedup_of_every_repeat() -> None:
    from utils.decoding.decoding_metrics import verdict

    def repeated(point: sweeps.SweepPoint, prompts, plain_times, candidate_times) -> sweeps.PointResult:
        records = []
        for prompt in prompts:
            records.append(record(mode="plain", setting="greedy", prompt_id=prompt.id, task=prompt.task,
                                  wall_seconds=sorted(plain_times)[1], wall_seconds_all=list(plain_times)))
            records.append(record(prompt_id=prompt.id, task=prompt.task, wall_seconds=sorted(candidate_times)[1],
                                  wall_seconds_all=list(candidate_times), identical_to_plain=True,
                                  speedup_vs_plain=sorted(plain_times)[1] / sorted(candidate_times)[1]))
        return sweeps.PointResult(point, records)

    prompts = PROMPTS[:1]  # one code prompt
    k1, k2 = sweeps.k_points([1, 2])
    # repeat by repeat: K=1 1.25x, 0.8x, 1.0x (straddles 1); K=2 1.2x, 1.1x, 1.3x (faster in every repeat)
    result = sweeps.SweepResult("K", "fake", "CPU", [repeated(k1, prompts, (1.0, 1.0, 1.0), (0.8, 1.25, 1.0)),
                                                     repeated(k2, prompts, (1.2, 1.1, 1.3), (1.0, 1.0, 1.0))],
                                list(prompts))
    rows = {row["value"]: row for row in result.rows()}
    assert rows[1]["repeats"] == 3
    assert (rows[1]["slowest_repeat"], rows[1]["fastest_repeat"]) == pytest.approx((0.8, 1.25))
    assert (rows[2]["slowest_repeat"], rows[2]["fastest_repeat"]) == pytest.approx((1.1, 1.3))
    assert rows[2]["repeat_speedups"] == pytest.approx([1.2, 1.1, 1.3])
    assert rows[2]["speedup"] == pytest.approx(1.2)  # the median over repeats
    assert verdict(rows[2]["repeat_speedups"]) == "faster"
    assert verdict(rows[1]["repeat_speedups"]) == "no clear difference"
    assert fake_sweep(sweeps.k_points([1])).rows()[0]["repeat_speedups"] == []  # one run each: no repeats
