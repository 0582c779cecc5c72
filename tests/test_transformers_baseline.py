"""Tests for utils.decoding.transformers_baseline: arguments mirror the settings, greedy assisted generation is lossless,
records are consistent and comparable only with transformers' own plain runs."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from utils.decoding.generation import DecodingSettings, compare_with_plain
from utils.decoding.pipelines import DEFAULT_NUM_ASSISTANT_TOKENS, SpeculationSetupError
from utils.decoding.prompts import get_prompt
from utils.decoding.transformers_baseline import (
    configure_draft,
    generate_arguments,
    load_transformers_models,
    measure_transformers,
    run_transformers_prompt,
)

NEW_TOKENS = 12


def fake_models(draft=True) -> SimpleNamespace:
    tokenizer = SimpleNamespace(pad_token_id=None, eos_token_id=2)
    draft_model = SimpleNamespace(generation_config=SimpleNamespace()) if draft else None
    return SimpleNamespace(tokenizer=tokenizer, draft=draft_model)


def test_generate_arguments_mirror_the_settings() -> None:
    models = fake_models()
    plain = generate_arguments(models, DecodingSettings(max_new_tokens=9))
    assert plain == {"max_new_tokens": 9, "do_sample": False, "num_beams": 1, "pad_token_id": 2}
    lookup = generate_arguments(models, DecodingSettings("prompt_lookup", num_assistant_tokens=5, max_ngram_size=2))
    assert (lookup["prompt_lookup_num_tokens"], lookup["max_matching_ngram_size"]) == (5, 2)
    speculative = generate_arguments(models, DecodingSettings("speculative"))
    assert speculative["assistant_model"] is models.draft
    for unsupported in (DecodingSettings(do_sample=True), DecodingSettings(ignore_eos=True),
                        DecodingSettings("speculative", assistant_confidence_threshold=0.3)):
        with pytest.raises(SpeculationSetupError, match="greedily with a fixed K"):
            generate_arguments(models, unsupported)
    with pytest.raises(SpeculationSetupError, match="draft=None"):
        generate_arguments(fake_models(draft=False), DecodingSettings("speculative"))


def test_configure_draft_sets_a_fixed_k_where_transformers_reads_it() -> None:
    models = fake_models()
    configure_draft(models, DecodingSettings("speculative", num_assistant_tokens=4))
    config = models.draft.generation_config
    assert (config.num_assistant_tokens, config.assistant_confidence_threshold,
            config.num_assistant_tokens_schedule) == (4, 0.0, "constant")
    configure_draft(models, DecodingSettings("speculative"))
    assert config.num_assistant_tokens == DEFAULT_NUM_ASSISTANT_TOKENS


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(SpeculationSetupError, match="draft must be 'int8-dynamic'"):
        load_transformers_models(draft="int4")
    with pytest.raises(SpeculationSetupError, match="not a Hugging Face model folder"):
        load_transformers_models(tmp_path)
    with pytest.raises(SpeculationSetupError, match="threads"):
        load_transformers_models(threads=0)
    with pytest.raises(SpeculationSetupError, match="not a Hugging Face model folder .* draft model"):
        load_transformers_models(draft=tmp_path / "no-such-draft")


def test_a_draft_folder_with_another_vocabulary_is_refused(offline_pair, tmp_path: Path) -> None:
    """Assisted generation passes token ids across: a draft whose tokenizer differs is refused before loading."""
    from transformers import AutoTokenizer

    other = tmp_path / "other-tokenizer"
    tokenizer = AutoTokenizer.from_pretrained(offline_pair.hf)
    tokenizer.add_tokens(["<not-in-the-main-vocabulary>"])
    tokenizer.save_pretrained(other)
    (other / "config.json").write_text((offline_pair.hf / "config.json").read_text())
    with pytest.raises(SpeculationSetupError, match="tokenizers of .* differ"):
        load_transformers_models(offline_pair.hf, draft=other)


def test_a_draft_folder_is_loaded_as_a_separate_fp32_draft(offline_pair) -> None:
    models = load_transformers_models(offline_pair.hf, draft=offline_pair.hf, threads=1)
    assert models.draft is not None and models.draft is not models.main
    assert next(models.draft.parameters()).dtype == next(models.main.parameters()).dtype
    record = run_transformers_prompt(models, "Name three colours.",
                                     DecodingSettings("speculative", num_assistant_tokens=3, max_new_tokens=8))
    assert record.generated_tokens == 8 and record.backend == "transformers"


@pytest.fixture(scope="module")
def self_drafted(offline_pair):
    return load_transformers_models(offline_pair.hf, draft=offline_pair.hf, threads=1)  # a copy of itself


def test_greedy_assisted_and_lookup_generation_match_plain(self_drafted) -> None:
    prompt = get_prompt("ground-dates")
    settings = [DecodingSettings(max_new_tokens=NEW_TOKENS),
                DecodingSettings("speculative", num_assistant_tokens=2, max_new_tokens=NEW_TOKENS),
                DecodingSettings("prompt_lookup", max_new_tokens=NEW_TOKENS)]
    records = compare_with_plain(measure_transformers(self_drafted, settings, [prompt], warmup=0, repeats=1))
    plain, speculative, lookup = records
    assert all(record.backend == "transformers" and record.precision == "f32" for record in records)
    assert all(record.generated_tokens == len(record.token_ids) > 0 for record in records)
    assert speculative.token_ids == plain.token_ids and lookup.token_ids == plain.token_ids
    assert all(record.identical_to_plain and record.speedup_vs_plain is not None for record in records)
    # Plain: one main-model pass per token. A draft as good as the main (itself) cuts the passes to about a third.
    assert plain.main_passes == plain.generated_tokens
    assert speculative.main_passes <= -(-speculative.generated_tokens // 3) + 1
    assert lookup.main_passes <= lookup.generated_tokens
    assert speculative.accepted_from_steps == speculative.generated_tokens - speculative.main_passes
    assert plain.text.strip() and plain.acceptance_rate is None


def test_int8_dynamic_draft_is_a_different_cheaper_model(offline_pair) -> None:
    import torch

    models = load_transformers_models(offline_pair.hf, draft="int8-dynamic", threads=1)
    assert models.draft is not models.main
    quantised = [module for module in models.draft.modules() if "quantized" in type(module).__module__]
    assert quantised, "the int8 draft has no quantised layers"
    assert not any("quantized" in type(module).__module__ for module in models.main.modules())
    record = run_transformers_prompt(models, "Name three colours.",
                                     DecodingSettings("speculative", num_assistant_tokens=2, max_new_tokens=8))
    assert record.generated_tokens == len(record.token_ids) > 0 and record.main_passes >= 1
    assert torch.get_num_threads() == 1
