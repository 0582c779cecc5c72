"""Tests of utils.sweeps: the disk cache, sweep points, summaries, and the sweep runner (fake and real models)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from figure_data import plotted_values
from utils import result_cache, sweeps
from utils.figures import save_figure
from utils.pipelines import SpeculationSetupError
from utils.generation import DecodingSettings, GenerationRecord
from utils.model_catalogue import ModelPair, ModelSpec, get_pair
from utils.model_check import REQUIRED_OPENVINO_FILES
from utils.prompts import Prompt, select_prompts
from utils.speedup_model import expected_tokens_per_pass


def record(**values) -> GenerationRecord:
    """A GenerationRecord with harmless defaults for every field not given."""
    defaults = {"mode": "speculative", "setting": "K=3", "prompt_id": "p", "task": "chat", "device": "CPU",
                "precision": "f32", "backend": "continuous_batching", "input_tokens": 10, "generated_tokens": 8,
                "token_ids": [1] * 8, "text": "", "wall_seconds": 1.0, "tokens_per_second": 8.0}
    data = {}
    for field in dataclasses.fields(GenerationRecord):
        if field.name in values:
            data[field.name] = values[field.name]
        elif field.name in defaults:
            data[field.name] = defaults[field.name]
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            data[field.name] = None
    return GenerationRecord(**data)


# --------------------------------------------------------------------------- cache


def test_cache_round_trip_clear_and_disable(tmp_path: Path) -> None:
    cache = sweeps.ResultCache(tmp_path)
    key = {"kind": "point", "a": 1, "b": [1, 2]}
    assert cache.get(key) is None
    cache.put(key, [{"x": 1.5}])
    assert cache.get({"b": [1, 2], "a": 1, "kind": "point"}) == [{"x": 1.5}]  # key order does not matter
    assert cache.get({**key, "a": 2}) is None
    assert cache.clear() == 1
    assert cache.get(key) is None
    disabled = sweeps.ResultCache(tmp_path, enabled=False)
    disabled.put(key, 1)
    assert disabled.get(key) is None
    assert not list(tmp_path.glob("*.json"))


def test_corrupt_cache_file_is_measured_again(tmp_path: Path) -> None:
    cache = sweeps.ResultCache(tmp_path)
    key = {"kind": "point", "a": 1}
    cache.path_of(key).parent.mkdir(parents=True, exist_ok=True)
    cache.path_of(key).write_text("{not json")
    value, from_cache = cache.get_or_compute(key, lambda: 42)
    assert (value, from_cache) == (42, False)
    assert cache.get_or_compute(key, lambda: 0) == (42, True)
    assert json.loads(cache.path_of(key).read_text())["key"] == key


def test_make_cache_can_clear_first(tmp_path: Path) -> None:
    sweeps.ResultCache(tmp_path).put({"kind": "x"}, 1)
    assert result_cache.make_cache(folder=tmp_path).get({"kind": "x"}) == 1
    assert result_cache.make_cache(folder=tmp_path, clear_cache=True).get({"kind": "x"}) is None


def test_default_cache_lives_in_the_build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_BUILD_DIR", str(tmp_path))
    assert sweeps.ResultCache().folder == tmp_path / result_cache.CACHE_FOLDER_NAME


# --------------------------------------------------------------------------- a fake pair on disk


@pytest.fixture
def fake_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModelPair:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("SPECDEC_BUILD_DIR", str(tmp_path / "build"))
    specs = {}
    for name in ("main", "draft", "draft8"):
        folder = tmp_path / "models" / f"fake-{name}"
        folder.mkdir(parents=True)
        for file_name in REQUIRED_OPENVINO_FILES:
            (folder / file_name).write_text("placeholder")
        (folder / "openvino_model.bin").write_bytes(b"0" * 1000)
        specs[name] = ModelSpec(f"fake-{name}", name, 1e6, "fp16")
    return ModelPair("fake", "fake pair", specs["main"], specs["draft"], needs_network=False,
                     alternative_drafts={"int8": specs["draft8"]})


PROMPTS = [Prompt("c1", "code", "Write code."), Prompt("h1", "chat", "Hello?"),
           Prompt("s1", "summarisation", "Summarise " + "words " * 10, "long")]


def fake_records(point, prompts) -> list[GenerationRecord]:
    """Pretend measurement: plain takes 1 s per prompt; K=k takes 1/(1 + 0.1 k) s with identical output."""
    k = point.settings.num_assistant_tokens or 1
    out = []
    for prompt in prompts:
        steps = [1] + [k + 1] * 3 + [1]  # the prefill pass, every draft token accepted, a cut-short last pass
        out.append(record(mode="plain", setting="greedy", prompt_id=prompt.id, task=prompt.task, wall_seconds=1.0))
        out.append(record(prompt_id=prompt.id, task=prompt.task, wall_seconds=1.0 / (1 + 0.1 * k),
                          speedup_vs_plain=1 + 0.1 * k, identical_to_plain=True, acceptance_rate=0.5,
                          tokens_per_step=steps, generated_tokens=sum(steps), main_passes=len(steps)))
    return out


def fake_measure(calls: list):
    """A stand-in for `sweeps.measure_points` that logs which points were measured together."""
    def measure(pool, points, prompts, *, warmup=1, repeats=2, progress=None):
        calls.append([point.value for point in points])
        return [fake_records(point, prompts) for point in points]
    return measure


def test_run_sweep_measures_once_then_reads_the_cache(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(sweeps, "measure_points", fake_measure(calls))
    points = sweeps.k_points([1, 2, 4])
    first = sweeps.run_sweep(fake_pair, points, PROMPTS, progress=False)
    assert calls == [[1, 2, 4]]  # one pipeline: measured together, plain once
    assert not any(point.from_cache for point in first.points)

    def no_loading(self, spec):
        raise AssertionError("a cached sweep must not load models")

    monkeypatch.setattr(sweeps.PipelinePool, "get", no_loading)
    again = sweeps.run_sweep(fake_pair, points, PROMPTS, progress=False)
    assert calls == [[1, 2, 4]]
    assert [point.from_cache for point in again.points] == [True, True, True]
    assert [row["speedup"] for row in again.rows()] == pytest.approx([row["speedup"] for row in first.rows()])


def test_run_sweep_measures_only_missing_points_grouped_by_pipeline(fake_pair: ModelPair,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(sweeps, "measure_points", fake_measure(calls))
    sweeps.run_sweep(fake_pair, sweeps.k_points([2]), PROMPTS, progress=False)
    int8 = sweeps.PipelineSpec(draft_variant="int8")
    mixed = sweeps.k_points([1, 2, 3]) + sweeps.k_points([2], pipeline=int8) + sweeps.k_points([5], max_new_tokens=8)
    result = sweeps.run_sweep(fake_pair, mixed, PROMPTS, progress=False)
    assert calls == [[2], [1, 3], [2], [5]]
    assert [point.point.value for point in result.points] == [1, 2, 3, 2, 5]  # the order asked for
    assert [point.from_cache for point in result.points] == [False, True, False, False, False]
    sweeps.ResultCache().clear()
    sweeps.run_sweep(fake_pair, sweeps.k_points([2]), PROMPTS, progress=False)
    assert calls[-1] == [2]  # measured again after clearing


def test_sweep_rows_group_by_task_length_and_prompt(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweeps, "measure_points", fake_measure([]))
    result = sweeps.run_sweep(fake_pair, sweeps.k_points([2, 4]), PROMPTS, cache=sweeps.ResultCache(enabled=False),
                              progress=False)
    by_task = result.rows(by="task")
    assert {(row["value"], row["group"]) for row in by_task} == {(k, t) for k in (2, 4)
                                                                  for t in ("code", "chat", "summarisation")}
    by_length = {(row["value"], row["group"]): row for row in result.rows(by="length")}
    assert by_length[(2, "short")]["prompts"] == 2 and by_length[(2, "long")]["prompts"] == 1
    overall = {row["value"]: row for row in result.rows()}
    assert overall[4]["speedup"] == pytest.approx(1.4)
    assert overall[4]["tokens_per_pass"] == 5  # the prefill pass and the last pass are left out
    assert overall[4]["per_token_acceptance"] == pytest.approx(1.0, abs=1e-6)
    assert result.best()["all"]["value"] == 4
    assert result.speedup_by_value(prompt_ids=["c1"]) == pytest.approx({2: 1.2, 4: 1.4})
    assert {row["group"] for row in result.rows(by="prompt")} == {"c1", "h1", "s1"}
    with pytest.raises(ValueError):
        result.rows(by="colour")


def test_run_sweep_checks_model_folders_before_measuring(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(sweeps, "measure_points", fake_measure(calls))
    missing = dataclasses.replace(fake_pair, draft=ModelSpec("nowhere", "missing", 1e6, "int4"))
    with pytest.raises(ValueError, match="does not exist"):
        sweeps.run_sweep(missing, sweeps.k_points([1, 2]), PROMPTS, progress=False)
    assert calls == []
    with pytest.raises(ValueError, match="at least one point"):
        sweeps.run_sweep(fake_pair, [], PROMPTS, progress=False)


def test_cache_key_covers_what_changes_a_measurement(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    point = sweeps.k_points([3])[0]
    base = sweeps.point_cache_key(fake_pair, "CPU", point, PROMPTS, 1, 2)
    digest = sweeps.ResultCache.digest
    assert digest(base) == digest(sweeps.point_cache_key(fake_pair, "CPU", point, PROMPTS, 1, 2))
    variations = [
        sweeps.point_cache_key(fake_pair, "GPU", point, PROMPTS, 1, 2),
        sweeps.point_cache_key(fake_pair, "CPU", sweeps.k_points([4])[0], PROMPTS, 1, 2),
        sweeps.point_cache_key(fake_pair, "CPU", point, PROMPTS[:2], 1, 2),
        sweeps.point_cache_key(fake_pair, "CPU", point, [dataclasses.replace(PROMPTS[0], text="Other.")] + PROMPTS[1:],
                               1, 2),
        sweeps.point_cache_key(fake_pair, "CPU", point, PROMPTS, 1, 3),
        sweeps.point_cache_key(fake_pair, "CPU", dataclasses.replace(point, pipeline=sweeps.PipelineSpec(
            draft_variant="int8")), PROMPTS, 1, 2),
    ]
    assert len({digest(key) for key in variations} | {digest(base)}) == len(variations) + 1
    monkeypatch.setattr(sweeps, "package_versions", lambda: {"openvino": "0.0"})
    assert digest(sweeps.point_cache_key(fake_pair, "CPU", point, PROMPTS, 1, 2)) != digest(base)


def test_model_fingerprint_follows_the_build_marker(tmp_path: Path) -> None:
    (tmp_path / "openvino_model.bin").write_bytes(b"12345")
    without_marker = sweeps.model_fingerprint(tmp_path)
    assert without_marker.startswith("5-")
    (tmp_path / ".complete").write_text('{"built_at": 1}')
    first = sweeps.model_fingerprint(tmp_path)
    (tmp_path / ".complete").write_text('{"built_at": 2}')
    assert sweeps.model_fingerprint(tmp_path) != first
    assert sweeps.model_fingerprint(tmp_path / "missing") == "missing"


# --------------------------------------------------------------------------- points and specs


def test_pipeline_specs() -> None:
    spec = sweeps.PipelineSpec(draft_variant="int8", draft_precision="bf16", cache_size_gb=1)
    assert spec.plain_reference == sweeps.PipelineSpec("plain", main_precision="f32", cache_size_gb=1)
    assert spec.label == "int8 draft @ bf16, main @ f32"
    with pytest.raises(SpeculationSetupError):
        sweeps.PipelineSpec("plain", draft_variant="int8")
    with pytest.raises(SpeculationSetupError):
        sweeps.PipelineSpec(main_precision="f64")


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


def test_sweep_prompts_mix_short_and_long() -> None:
    prompts = sweeps.sweep_prompts(long_prompts=2)
    short = [p for p in prompts if p.length == "short"]
    assert sorted(p.task for p in short) == sorted({p.task for p in select_prompts(length="short")})
    assert sum(p.length == "long" for p in prompts) == 2
    assert all(p.length == "short" for p in sweeps.sweep_prompts(long_prompts=0))


def test_grids_are_consistent() -> None:
    for grid in (sweeps.SMALL_GRID, sweeps.FULL_GRID):
        assert 3 in grid.ks  # the auto-tuner's default probe
        assert all(0 < t < 1 for t in grid.thresholds)
    assert set(sweeps.SMALL_GRID.ks) <= set(sweeps.FULL_GRID.ks)


def test_summary_of_fabricated_records() -> None:
    steps = [1, 3, 2, 4, 1]
    records = [record(speedup_vs_plain=2.0, wall_seconds=1.0, tokens_per_step=steps, identical_to_plain=True,
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


def test_cached_records_of_an_old_layout_are_ignored() -> None:
    assert sweeps._records_or_none([{"mode": "plain"}]) is None
    assert sweeps._records_or_none(None) is None
    assert sweeps._records_or_none([record().as_dict()])[0] == record()


# --------------------------------------------------------------------------- real models (small)

OFFLINE = get_pair("offline")


def test_real_sweep_concurrency_and_memory(tmp_path: Path, offline_pair) -> None:
    cache = sweeps.ResultCache(tmp_path)
    pool = sweeps.PipelinePool(OFFLINE)
    prompts = select_prompts(tasks=["code"], length="short", per_task=1)
    result = sweeps.run_sweep(OFFLINE, sweeps.k_points([2], max_new_tokens=8), prompts, repeats=1, cache=cache,
                              pool=pool, progress=False)
    row = result.rows()[0]
    assert row["identical"] and row["speedup"] is not None and 0.0 <= row["acceptance_rate"] <= 1.0
    assert 1.0 <= row["tokens_per_pass"] <= 3.0

    # A low confidence threshold lets the draft propose several tokens per step (it needs token probabilities).
    low_threshold = sweeps.run_sweep(OFFLINE, sweeps.threshold_points([0.05], max_new_tokens=16), prompts, repeats=1,
                                     cache=cache, pool=pool, progress=False).rows()[0]
    assert low_threshold["identical"] and low_threshold["max_tokens_per_pass"] > 2

    settings = DecodingSettings("speculative", num_assistant_tokens=2, max_new_tokens=8)
    load = sweeps.measure_concurrency(OFFLINE, [2, 1], prompts, settings, repeats=1, cache=cache, pool=pool,
                                      progress=False)
    assert [(r["concurrency"], r["mode"]) for r in load] == [(1, "plain"), (1, "speculative"), (2, "plain"),
                                                             (2, "speculative")]
    assert all(r["identical_to_plain"] for r in load)
    assert load[2]["generated_tokens"] == 2 * load[0]["generated_tokens"]
    pool.release()

    memory = sweeps.measure_memory(OFFLINE, [sweeps.PipelineSpec("plain")], prompts,
                                   {"plain": DecodingSettings("plain", max_new_tokens=4)}, cache=cache, progress=False)
    assert memory[0]["peak_rss_mb"] >= memory[0]["rss_after_load_mb"] > memory[0]["rss_start_mb"] > 0
    assert memory[0]["main_weights_mb"] > 100


def test_batch_exactness_refuses_bad_input(offline_pair) -> None:
    speculative = DecodingSettings("speculative", num_assistant_tokens=2, max_new_tokens=4)
    with pytest.raises(SpeculationSetupError):
        sweeps.batch_exactness(OFFLINE, ["Hi"], 2, DecodingSettings("plain", max_new_tokens=4), progress=False)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="requests"):
            sweeps.batch_exactness(OFFLINE, ["Hi"], bad, speculative, progress=False)
    with pytest.raises(ValueError, match="prompt"):
        sweeps.batch_exactness(OFFLINE, [], 2, speculative, progress=False)
    with pytest.raises(ValueError, match="token budget"):
        sweeps.batch_exactness(OFFLINE, ["Hi"], 2, speculative, token_budgets=[], progress=False)


def test_a_large_token_budget_keeps_a_speculative_batch_exact(offline_pair) -> None:
    # The workaround notebook 05 recommends: with every prompt of the batch prefilled in one step, each of 8
    # concurrent speculative requests must equal plain greedy decoding of its prompt alone (f32).
    prompts = sweeps.sweep_prompts(long_prompts=0)
    settings = DecodingSettings("speculative", num_assistant_tokens=3, max_new_tokens=12)
    [row] = sweeps.batch_exactness(OFFLINE, prompts, 8, settings, token_budgets=[4096], progress=False)
    assert row["max_num_batched_tokens"] == 4096 and row["requests"] == 8
    assert row["plain batch = alone"] == 8
    assert row["speculative batch = alone"] == 8 and row["differing requests"] == []


def test_pair_step_times_are_cached(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    from utils import verification_cost as vc

    calls = []

    def fake(main_dir, draft_dir, device, *, token_counts, context_tokens, repeats, main_precision, draft_precision):
        calls.append((Path(draft_dir).name, list(token_counts), draft_precision))
        return ([vc.StepTime("main", count, context_tokens, 10.0 * count, [10.0 * count]) for count in token_counts],
                vc.StepTime("draft", 1, context_tokens, 4.0, [4.0]))

    monkeypatch.setattr(vc, "measure_pair_step_times", fake)
    cache = sweeps.ResultCache()
    main_steps, draft_step, from_cache = sweeps.cached_pair_step_times(fake_pair, token_counts=[3, 1], cache=cache)
    assert not from_cache and [step.tokens for step in main_steps] == [1, 3] and draft_step.median_ms == 4.0
    assert sweeps.cached_pair_step_times(fake_pair, token_counts=[1, 3], cache=cache)[2]  # same key, from cache
    sweeps.cached_pair_step_times(fake_pair, draft_variant="int8", token_counts=[1, 3], cache=cache)
    assert calls == [("fake-draft", [1, 3], "f32"), ("fake-draft8", [1, 3], "f32")]


def test_pool_spells_the_same_pipeline_one_way(fake_pair: ModelPair) -> None:
    pool = sweeps.PipelinePool(fake_pair)
    default = sweeps.PipelineSpec()
    fake_pair_with_named_default = dataclasses.replace(
        fake_pair, alternative_drafts={**fake_pair.alternative_drafts, "mine": fake_pair.draft})
    named = sweeps.PipelinePool(fake_pair_with_named_default)
    assert named.canonical(sweeps.PipelineSpec(draft_variant="mine", draft_precision="f32")) == default
    assert pool.canonical(sweeps.PipelineSpec(draft_variant="int8", draft_precision="f32")) == \
        sweeps.PipelineSpec(draft_variant="int8")
    assert pool.canonical(sweeps.PipelineSpec(draft_precision="bf16")).draft_precision == "bf16"
    assert pool.canonical(sweeps.PipelineSpec("plain")) == sweeps.PipelineSpec("plain")


# --------------------------------------------------------------------------- plots and tables of sweep results


def test_plots_recommendations_and_figures_of_a_fake_sweep(fake_pair: ModelPair, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from utils import tuning_plots
    from utils.autotune import StepCostModel, Trial, autotune, recommendation_rows, theory_rows
    from utils.verification_cost import StepTime

    monkeypatch.setattr(sweeps, "measure_points", fake_measure([]))
    k_sweep = sweeps.run_sweep(fake_pair, sweeps.k_points([1, 2, 4]), PROMPTS, progress=False)
    threshold_sweep = sweeps.run_sweep(fake_pair, sweeps.threshold_points([0.3, 0.6]), PROMPTS, progress=False)
    load = [{"concurrency": n, "mode": mode, "latency_seconds": 1.0, "tokens_per_second": rate,
             "throughput_vs_plain": rate / 10.0, "latency_speedup": rate / 10.0, "identical_to_plain": True}
            for n in (1, 2) for mode, rate in (("plain", 10.0), ("speculative", 12.0 / n))]
    rows = recommendation_rows(k_sweep, threshold_sweep, concurrency=load)
    by_scope = {row["scope"]: row for row in rows}
    assert by_scope["task: code"]["recommended"] == "K=4" and by_scope["task: code"]["speed-up"] == pytest.approx(1.4)
    assert by_scope["load: 1 request(s) at once"]["recommended"] == "speculative"
    assert by_scope["load: 2 request(s) at once"]["verdict"].startswith("slower")

    steps = [StepTime("main", n, 64, 10.0 + n, [10.0 + n]) for n in range(1, 6)]
    model = StepCostModel(2.0, lambda n: 10.0 + n)
    theory = theory_rows(k_sweep.rows(), model)
    assert [row["K"] for row in theory] == [1, 2, 4]
    tuned = autotune(lambda k: Trial(k, k_sweep.speedup_by_value()[k], k + 1.0), [1, 2, 4], budget_seconds=10)
    memory = [{"pipeline": "plain", "cache_size_gb": "dynamic", "rss_after_load_mb": 100.0, "peak_rss_mb": 200.0}]
    figures = {
        "sweep": tuning_plots.plot_sweep(k_sweep, by="length"),
        "drafts": tuning_plots.plot_drafts(k_sweep, {"1": 10.0}),
        "load": tuning_plots.plot_concurrency(load),
        "steps": tuning_plots.plot_step_times(steps, StepTime("draft", 1, 64, 2.0, [2.0])),
        "memory": tuning_plots.plot_memory(memory),
        "theory": tuning_plots.plot_theory(theory),
        "autotune": tuning_plots.plot_autotune(k_sweep.speedup_by_value(), tuned),
    }
    expected = {  # each figure must draw these numbers (bar heights/widths, line or marker positions)
        "sweep": [row["speedup"] for row in k_sweep.rows(by="length")],
        "drafts": [row["speedup"] for row in k_sweep.rows()],
        "load": [10.0, 12.0, 6.0],
        "steps": [11.0, 12.0, 13.0, 14.0, 15.0, 2.0],
        "memory": [100.0, 200.0],
        "theory": [row["measured"] for row in theory] + [row["with_verification_cost"] for row in theory],
        "autotune": list(k_sweep.speedup_by_value().values()),
    }
    for name, figure in figures.items():
        drawn = plotted_values(figure)
        missing = [value for value in expected[name] if not any(abs(value - seen) < 1e-6 for seen in drawn)]
        assert not missing, f"{name} does not draw {missing}"
    monkeypatch.setenv("SPECDEC_FIGURES_DIR", str(tmp_path / "figures"))
    assert save_figure(figures["sweep"], "05-sweep").resolve() == tmp_path.resolve() / "figures" / "05-sweep.png"
    assert (tmp_path / "figures" / "05-sweep.png").is_file()
