"""Helpers of notebook 04 (IPEX-LLM self-speculation) that run without ipex_llm, in the main environment.

Models are replaced by small fakes that behave like IPEX-LLM's patched model:
a `generate` that takes the ids by position and leaves statistics attributes behind.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from utils.paths import REPO_ROOT
from utils.selfspec import ipex_comparisons as compare
from utils.selfspec import ipex_legacy_view as lv
from utils.selfspec import ipex_self_speculation as ss

# --------------------------------------------------------------------------- folder translation for transformers 4.37


def test_legacy_config_lifts_rope_theta_and_dtype() -> None:
    config = {"model_type": "llama", "dtype": "float32",
              "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}}
    fixed = lv.legacy_config(config)
    assert fixed["rope_theta"] == 100000.0
    assert fixed["torch_dtype"] == "float32"
    assert "rope_theta" not in config  # the input is not modified


def test_legacy_config_keeps_an_explicit_rope_theta() -> None:
    fixed = lv.legacy_config({"rope_theta": 500000.0, "rope_parameters": {"rope_theta": 1.0}})
    assert fixed["rope_theta"] == 500000.0


def test_legacy_config_refuses_rope_scaling_it_cannot_translate() -> None:
    with pytest.raises(lv.LegacyViewError, match="RoPE type"):
        lv.legacy_config({"rope_parameters": {"rope_theta": 1e4, "rope_type": "yarn"}})


def test_legacy_tokenizer_json_writes_old_merge_format() -> None:
    tokenizer = {"model": {"type": "BPE", "merges": [["Ġ", "t"], "i n"], "ignore_merges": False, "vocab": {}}}
    fixed = lv.legacy_tokenizer_json(tokenizer)
    assert fixed["model"]["merges"] == ["Ġ t", "i n"]
    assert "ignore_merges" not in fixed["model"]
    assert tokenizer["model"]["merges"][0] == ["Ġ", "t"]  # the input is not modified


def test_legacy_tokenizer_json_refuses_merges_with_spaces() -> None:
    with pytest.raises(lv.LegacyViewError, match="space"):
        lv.legacy_tokenizer_json({"model": {"type": "BPE", "merges": [["a b", "c"]]}})


def test_legacy_tokenizer_config_names_a_class_transformers_437_knows() -> None:
    fixed = lv.legacy_tokenizer_config({"tokenizer_class": "TokenizersBackend", "backend": "tokenizers",
                                        "eos_token": "<|im_end|>"}, "{{ messages }}")
    assert fixed["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert "backend" not in fixed
    assert fixed["chat_template"] == "{{ messages }}"
    assert fixed["model_input_names"] == ["input_ids", "attention_mask"]
    assert fixed["eos_token"] == "<|im_end|>"


def make_fake_hf_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"rope_parameters": {"rope_theta": 100000.0}}))
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "merges": [["a", "b"]]}}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "TokenizersBackend"}))
    (folder / "chat_template.jinja").write_text("TEMPLATE")
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / ".complete").write_text("{}")
    return folder


def test_legacy_model_view_links_weights_and_rewrites_small_files(tmp_path: Path) -> None:
    source = make_fake_hf_folder(tmp_path / "hf")
    view = lv.legacy_model_view(source, tmp_path / "view")
    assert (view / "model.safetensors").is_symlink()
    assert (view / "model.safetensors").read_bytes() == b"weights"
    assert json.loads((view / "config.json").read_text())["rope_theta"] == 100000.0
    assert json.loads((view / "tokenizer.json").read_text())["model"]["merges"] == ["a b"]
    assert json.loads((view / "tokenizer_config.json").read_text())["chat_template"] == "TEMPLATE"
    assert not (view / ".complete").exists()
    lv.legacy_model_view(source, view)  # again: no error, same result
    assert (view / "model.safetensors").read_bytes() == b"weights"


def test_missing_model_folder_says_how_to_make_it(tmp_path: Path) -> None:
    with pytest.raises(lv.LegacyViewError, match="tutorial.py lab"):
        lv.legacy_model_view(tmp_path / "nothing", tmp_path / "view")


def test_incomplete_model_folder_is_refused(tmp_path: Path) -> None:
    source = make_fake_hf_folder(tmp_path / "hf")
    (source / "model.safetensors").unlink()
    with pytest.raises(lv.LegacyViewError, match="incomplete"):
        lv.check_hf_folder(source)


def test_view_of_the_real_folder_keeps_the_tokenizer(offline_pair) -> None:
    """The rewritten tokenizer.json encodes exactly like the original (checked with today's `tokenizers`)."""
    from tokenizers import Tokenizer

    from utils.models.model_check import TOKENIZER_TEST_TEXT

    original = Tokenizer.from_file(str(offline_pair.hf / "tokenizer.json"))
    legacy = lv.legacy_tokenizer_json(json.loads((offline_pair.hf / "tokenizer.json").read_text()))
    rewritten = Tokenizer.from_str(json.dumps(legacy))
    assert rewritten.encode(TOKENIZER_TEST_TEXT).ids == original.encode(TOKENIZER_TEST_TEXT).ids
    config = lv.legacy_config(json.loads((offline_pair.hf / "config.json").read_text()))
    assert config["rope_theta"] == 100000.0  # SmolLM2's RoPE base, not transformers 4.37's default 10000


# --------------------------------------------------------------------------- recipe and inputs


def test_article_recipe_is_bf16_on_cpu_and_fp16_on_intel_gpu() -> None:
    assert ss.article_recipe("cpu") == {"torch_dtype": "bfloat16", "load_in_low_bit": "bf16"}
    assert ss.article_recipe("xpu") == {"torch_dtype": "float16", "load_in_low_bit": "fp16"}
    ss.article_recipe("cpu")["torch_dtype"] = "changed"
    assert ss.article_recipe("cpu")["torch_dtype"] == "bfloat16"  # a copy is returned
    with pytest.raises(ss.SelfSpeculationError):
        ss.article_recipe("cuda")


@pytest.mark.parametrize("max_new_tokens", [None, 0, -3, 2.5, True])
def test_max_new_tokens_must_be_given(max_new_tokens) -> None:
    with pytest.raises(ss.SelfSpeculationError, match="10 tokens"):
        ss.check_generate_inputs(torch.zeros(1, 4, dtype=torch.long), max_new_tokens, {})


def test_batch_of_two_is_refused_before_any_work() -> None:
    with pytest.raises(ss.SelfSpeculationError, match="batch size 1"):
        ss.check_generate_inputs(torch.zeros(2, 4, dtype=torch.long), 8, {})


def test_one_dimensional_ids_are_refused() -> None:
    with pytest.raises(ss.SelfSpeculationError, match="2-D"):
        ss.check_generate_inputs(torch.zeros(4, dtype=torch.long), 8, {})


@pytest.mark.parametrize("options, message", [
    ({"th_stop_draft": 1.5}, "probability"),
    ({"max_step_draft": 0}, "max_step_draft"),
    ({"num_assistant_tokens": 3}, "Unknown draft option"),
])
def test_bad_draft_options_are_refused(options: dict, message: str) -> None:
    ids, good = torch.zeros(1, 4, dtype=torch.long), {"th_stop_draft": 0.6, "max_step_draft": 4}
    ss.check_generate_inputs(ids, 8, good)  # the same call with good options passes: the bad option is the cause
    with pytest.raises(ss.SelfSpeculationError, match=message):
        ss.check_generate_inputs(ids, 8, {**good, **options})


# --------------------------------------------------------------------------- statistics


def ipex_counters(**overrides) -> SimpleNamespace:
    """Attributes IPEX-LLM leaves on the model after a speculative call (3 verify steps)."""
    counters = dict(n_drafted=9, n_matched=5, draft_num=[3, 4, 2], accept_num=[4, 2, 2],
                    draft_time=[0.03, 0.04, 0.02], verify_time=[0.05, 0.05, 0.06],
                    first_token_time=0.2, n_token_generated=9)
    counters.update(overrides)
    return SimpleNamespace(**counters)


def test_statistics_are_read_and_derived() -> None:
    stats = ss.read_speculation_stats(ipex_counters())
    assert stats.steps == 3
    assert stats.accepted_per_step == [3, 1, 1]
    assert stats.acceptance_rate == pytest.approx(5 / 9)
    assert stats.mean_tokens_per_step == pytest.approx((4 + 2) / 2)  # the last pass left out
    assert stats.mean_drafted_per_step == pytest.approx(3.0)
    assert stats.draft_seconds_per_token == pytest.approx(0.09 / 9)
    assert stats.verify_seconds_per_step == pytest.approx(0.16 / 3)
    assert stats.summary()["acceptance"] == pytest.approx(0.556)


def test_statistics_without_a_speculative_call_are_refused() -> None:
    with pytest.raises(ss.SelfSpeculationError, match="speculative=True"):
        ss.read_speculation_stats(SimpleNamespace(n_drafted=1))


def test_inconsistent_statistics_are_refused() -> None:
    with pytest.raises(ss.SelfSpeculationError, match="Inconsistent"):
        ss.read_speculation_stats(ipex_counters(n_drafted=10))


# --------------------------------------------------------------------------- generation with a fake IPEX-LLM model


class FakeSelfSpeculativeModel(torch.nn.Module):
    """Generates fixed continuations; speculative when a draft is attached, like IPEX-LLM's patched generate."""

    def __init__(self, plain: list[int], speculative: list[int]) -> None:
        super().__init__()
        self.draft_model = torch.nn.Linear(1, 1)
        self.plain, self.speculative = plain, speculative
        self.calls: list[dict] = []

    def generate(self, *args, **kwargs):
        if not args:
            raise TypeError("ids must go in by position")
        speculating = hasattr(self, "draft_model")
        self.calls.append({"speculative": speculating, "kwargs": kwargs})
        tokens = self.speculative if speculating else self.plain
        tokens = tokens[:kwargs["max_new_tokens"]]
        if speculating:
            self.n_drafted, self.n_matched = 4, 3
            self.draft_num, self.accept_num = [4], [len(tokens)]
            self.draft_time, self.verify_time, self.first_token_time = [0.01], [0.02], 0.03
            self.n_token_generated = len(tokens)
        return torch.cat([args[0], torch.tensor([tokens])], dim=1)


def test_plain_generation_hides_the_draft_only_during_the_call() -> None:
    model = FakeSelfSpeculativeModel(plain=[1, 2, 3], speculative=[1, 2, 4])
    ids = torch.tensor([[7, 8]])
    plain = ss.generate_greedy(model, ids, max_new_tokens=3, speculative=False)
    assert plain.token_ids == [1, 2, 3] and plain.stats is None
    assert model.calls[-1] == {"speculative": False, "kwargs": {"max_new_tokens": 3, "do_sample": False}}
    assert hasattr(model, "draft_model")  # restored
    spec = ss.generate_greedy(model, ids, max_new_tokens=3, th_stop_draft=0.5)
    assert spec.token_ids == [1, 2, 4]
    assert model.calls[-1]["speculative"] and model.calls[-1]["kwargs"]["th_stop_draft"] == 0.5
    assert spec.stats.acceptance_rate == pytest.approx(0.75)


def test_draft_is_restored_after_an_error() -> None:
    model = FakeSelfSpeculativeModel(plain=[1], speculative=[1])
    model.generate = lambda *args, **kwargs: (_ for _ in ()).throw(RuntimeError("boom"))
    with pytest.raises(RuntimeError):
        ss.generate_greedy(model, torch.tensor([[1]]), max_new_tokens=1, speculative=False)
    assert hasattr(model, "draft_model")


def test_speculation_without_a_draft_is_refused() -> None:
    model = FakeSelfSpeculativeModel(plain=[1], speculative=[1])
    del model.draft_model
    with pytest.raises(ss.SelfSpeculationError, match="speculative=True"):
        ss.generate_greedy(model, torch.tensor([[1]]), max_new_tokens=1)


def test_draft_options_without_speculation_are_refused() -> None:
    model = FakeSelfSpeculativeModel(plain=[1], speculative=[1])
    with pytest.raises(ss.SelfSpeculationError, match="no effect"):
        ss.generate_greedy(model, torch.tensor([[1]]), max_new_tokens=1, speculative=False, th_stop_draft=0.5)


def test_comparison_finds_the_divergence_point_and_runs_interleaved() -> None:
    model = FakeSelfSpeculativeModel(plain=[5, 6, 7, 8], speculative=[5, 6, 9, 8])
    prompts = {"p": torch.tensor([[1, 2, 3]])}
    [comparison] = compare.compare_plain_and_speculative(model, prompts, [{"th_stop_draft": 0.6}], max_new_tokens=4,
                                                         repeats=3)
    assert comparison.first_divergence == 2
    assert comparison.prompt_tokens == 3
    assert comparison.plain_run.generated_tokens == comparison.speculative_run.generated_tokens == 4
    assert comparison.stats.acceptance_rate == pytest.approx(0.75)
    order = [call["speculative"] for call in model.calls]
    assert order == [False, True] + [False, True] * 3  # warm-ups, then alternating timed runs
    assert len(comparison.plain.runs) == len(comparison.speculative.runs) == 3
    assert comparison.row()["first difference"] == 2


def test_identical_outputs_are_reported_as_such() -> None:
    model = FakeSelfSpeculativeModel(plain=[5, 6], speculative=[5, 6])
    [comparison] = compare.compare_plain_and_speculative(model, {"p": torch.tensor([[1]])}, [{}], max_new_tokens=2,
                                                         repeats=1)
    assert comparison.first_divergence is None
    assert comparison.row()["first difference"] == "identical"


class Clocks:
    """Stand-ins for `time.perf_counter` (wall) and `time.process_time` (CPU) that only the fake model moves."""

    def __init__(self) -> None:
        self.wall, self.cpu = 100.0, 7.0

    def perf_counter(self) -> float:
        return self.wall

    def process_time(self) -> float:
        return self.cpu


class TimedFakeModel(FakeSelfSpeculativeModel):
    """A fake whose plain calls take 0.1 s of wall and CPU time, and whose speculative calls 0.2 s of wall time
    but only 0.01 s of CPU (as if waiting most of the time)."""

    def __init__(self, clocks: Clocks, plain: list[int], speculative: list[int]) -> None:
        super().__init__(plain, speculative)
        self.clocks = clocks

    def generate(self, *args, **kwargs):
        wall, cpu = (0.2, 0.01) if hasattr(self, "draft_model") else (0.1, 0.1)
        self.clocks.wall += wall
        self.clocks.cpu += cpu
        return super().generate(*args, **kwargs)


def test_speedups_by_wall_and_cpu_time_come_from_the_shared_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    from utils.decoding import measurement

    clocks = Clocks()
    monkeypatch.setattr(measurement, "time", clocks)
    model = TimedFakeModel(clocks, plain=[1, 2], speculative=[1, 2])
    [comparison] = compare.compare_plain_and_speculative(model, {"p": torch.tensor([[1]])}, [{}], max_new_tokens=2,
                                                         repeats=2)
    assert comparison.speedups() == [pytest.approx(0.5)] * 2  # by wall time the waiting speculative run is slower...
    [row] = compare.speedup_rows([comparison])
    assert row["speed-up, CPU time"] == "10.00x [10.00x-10.00x]"  # ...by CPU time it is nearly free
    assert (row["verdict"], row["verdict, CPU time"]) == ("slower", "faster")


def test_module_imports_without_ipex_llm_or_openvino() -> None:
    code = ("import sys; sys.modules['ipex_llm'] = None; sys.modules['openvino'] = None; "
            "sys.modules['openvino_genai'] = None; import utils.selfspec.ipex_self_speculation, utils.selfspec.ipex_comparisons, "
            "utils.selfspec.ov_self_speculation")
    completed = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr


# --------------------------------------------------------------------------- the real IPEX-LLM, on a tiny model


@pytest.mark.models  # a real IPEX-LLM run
def test_statistics_from_a_real_ipex_llm_run(tmp_path: Path) -> None:
    """IPEX-LLM itself (its environment, `tests/ipex_tiny_model_work.py`) on a tiny random Llama: the counters
    exist under the names read_speculation_stats reads, and the derived figures follow utils.decoding.decoding_metrics."""
    from utils.decoding import decoding_metrics

    python = REPO_ROOT / ".venv-ipex" / "bin" / "python"
    if not python.is_file():
        pytest.fail(f"{python} is missing: the IPEX-LLM environment is made by `python3 tutorial.py setup`.",
                    pytrace=False)
    max_new_tokens = 24
    completed = subprocess.run(
        [str(python), str(REPO_ROOT / "tests" / "ipex_tiny_model_work.py"), str(tmp_path / "tiny-llama"),
         str(max_new_tokens)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
        env={**{k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "VIRTUAL_ENV"))},
             "PYTHONPATH": str(REPO_ROOT)})
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    raw, stats = result["raw"], result["stats"]
    assert stats["drafted"] == raw["n_drafted"] == sum(raw["draft_num"]) > 0
    assert stats["accepted"] == raw["n_matched"] == sum(raw["accept_num"]) - len(raw["accept_num"])
    assert stats["tokens_per_step"] == raw["accept_num"] and stats["drafted_per_step"] == raw["draft_num"]
    assert all(1 <= added <= drafted + 1 for added, drafted in zip(raw["accept_num"], raw["draft_num"], strict=True))
    assert len(result["speculative_ids"]) == len(result["plain_ids"]) == max_new_tokens == raw["n_token_generated"]
    assert sum(stats["main_pass_steps"]) == max_new_tokens and stats["main_pass_steps"][0] == 1  # prefill first
    assert stats["acceptance_rate"] == pytest.approx(decoding_metrics.acceptance_rate(raw["n_matched"], raw["n_drafted"]))
    assert stats["mean_tokens_per_step"] == pytest.approx(
        decoding_metrics.tokens_per_main_pass(stats["main_pass_steps"]))
