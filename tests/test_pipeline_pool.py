"""Tests of utils.tuning.pipeline_pool: pipeline specs, the pool's one spelling per pipeline, loading (real models)."""
from __future__ import annotations

import dataclasses

import pytest

from utils.decoding.pipelines import SpeculationSetupError
from utils.input_checks import InputError
from utils.models.model_catalogue import ModelPair, get_pair
from utils.tuning.pipeline_pool import BoundedPipelines, PipelinePool, PipelineSpec


def test_pipeline_specs(fake_pair: ModelPair) -> None:
    spec = PipelineSpec(draft_variant="int8", draft_precision="bf16", cache_size_gb=1)
    assert spec.plain_reference == PipelineSpec("plain", main_precision="f32", cache_size_gb=1)
    assert spec.label == "int8 draft @ bf16, main @ f32"
    assert PipelineSpec("plain").label == "plain (main f32)"
    assert spec.draft_spec(fake_pair) == fake_pair.alternative_drafts["int8"]
    assert PipelineSpec().draft_spec(fake_pair) == fake_pair.draft
    assert PipelineSpec("prompt_lookup").draft_spec(fake_pair) is None
    with pytest.raises(SpeculationSetupError):
        PipelineSpec("plain", draft_variant="int8")
    with pytest.raises(SpeculationSetupError):
        PipelineSpec(main_precision="f64")


def test_pool_spells_the_same_pipeline_one_way(fake_pair: ModelPair) -> None:
    pool = PipelinePool(fake_pair)
    default = PipelineSpec()
    fake_pair_with_named_default = dataclasses.replace(
        fake_pair, alternative_drafts={**fake_pair.alternative_drafts, "mine": fake_pair.draft})
    named = PipelinePool(fake_pair_with_named_default)
    assert named.canonical(PipelineSpec(draft_variant="mine", draft_precision="f32")) == default
    assert pool.canonical(PipelineSpec(draft_variant="int8", draft_precision="f32")) == PipelineSpec(draft_variant="int8")
    assert pool.canonical(PipelineSpec(draft_precision="bf16")).draft_precision == "bf16"
    assert pool.canonical(PipelineSpec("plain")) == PipelineSpec("plain")


def test_pool_loads_once_keeps_plain_and_evicts_the_rest(fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    from utils.tuning import pipeline_pool

    loads = []
    monkeypatch.setattr(pipeline_pool, "load_spec_pipeline", lambda pair, spec, device: loads.append(spec) or spec)
    pool = PipelinePool(fake_pair, keep=2)
    plain, int8 = PipelineSpec("plain"), PipelineSpec(draft_variant="int8")
    assert pool.get(plain) is plain and pool.get(PipelineSpec()) == PipelineSpec()
    assert pool.get(PipelineSpec(draft_precision="f32")) == PipelineSpec()  # the same pipeline: not loaded again
    assert pool.get(int8) == int8  # evicts the default draft's pipeline, keeps plain
    pool.get(plain)
    assert loads == [plain, PipelineSpec(), int8]
    assert pool.evictions == [f"Freed the {PipelineSpec().label} pipeline to make room for the {int8.label} pipeline "
                              "(at most 2 kept in memory)."]
    pool.release()
    pool.get(plain)
    assert loads[-1] == plain and len(loads) == 4


@dataclasses.dataclass(frozen=True)
class Key:
    mode: str
    name: str

    @property
    def label(self) -> str:
        return f"{self.mode} {self.name}"


def test_bounded_pipelines_free_the_least_recently_used_and_say_so() -> None:
    loads = []
    cache = BoundedPipelines(lambda key: loads.append(key) or f"loaded {key.label}", keep=3)
    plain, a, b, c = Key("plain", "p"), Key("speculative", "a"), Key("prompt_lookup", "b"), Key("speculative", "c")
    for key in (plain, a, b, a):  # a used again: b is now the least recently used speculative one
        assert cache.get(key) == f"loaded {key.label}"
    assert loads == [plain, a, b] and cache.evictions == []
    cache.get(c)
    for key in (plain, a, c):  # still in memory: not loaded again
        cache.get(key)
    assert loads == [plain, a, b, c] and cache.evictions == [
        "Freed the prompt_lookup b pipeline to make room for the speculative c pipeline (at most 3 kept in memory)."]
    loads.clear()
    only_plain = BoundedPipelines(lambda key: loads.append(key), keep=2)
    first, second, third = Key("plain", "1"), Key("plain", "2"), Key("plain", "3")
    for key in (first, second, first, third, first, third):  # all plain: the least recently used one goes
        only_plain.get(key)
    assert loads == [first, second, third] and "plain 2 pipeline" in only_plain.evictions[0]
    with pytest.raises(InputError, match="keep must be an integer >= 1"):
        BoundedPipelines(lambda key: key, keep=0)


def test_loaded_pipelines_compute_token_probabilities(offline_pair) -> None:
    from utils.tuning.pipeline_pool import load_spec_pipeline

    loaded = load_spec_pipeline(get_pair("offline"), PipelineSpec("plain"))
    config = loaded.pipeline.get_generation_config()
    assert config.logprobs >= 1  # without it, assistant_confidence_threshold has no effect (see the docstring)
    assert config.eos_token_id == loaded.pipeline.get_tokenizer().get_eos_token_id()
