"""Helpers of notebook 04 (IPEX-LLM self-speculation) that run without ipex_llm, in the main environment.

Models are replaced by small fakes that behave like IPEX-LLM's patched model:
a `generate` that takes the ids by position and leaves statistics attributes behind.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from utils import ipex_legacy_view as lv
from utils import ipex_self_speculation as ss
from utils.ov_self_speculation import summary_rows as openvino_summary_rows


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

    from utils.gguf_tokenizer import TOKENIZER_TEST_TEXT

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
    [comparison] = ss.compare_plain_and_speculative(model, prompts, [{"th_stop_draft": 0.6}], max_new_tokens=4,
                                                    repeats=3)
    assert comparison.first_divergence == 2
    assert comparison.prompt_tokens == 3
    assert comparison.plain_tokens == comparison.speculative_tokens == 4
    assert comparison.acceptance_rate == pytest.approx(0.75)
    order = [call["speculative"] for call in model.calls]
    assert order == [False, True] + [False, True] * 3  # warm-ups, then alternating timed runs
    assert comparison.row()["first difference"] == 2


def test_identical_outputs_are_reported_as_such() -> None:
    model = FakeSelfSpeculativeModel(plain=[5, 6], speculative=[5, 6])
    [comparison] = ss.compare_plain_and_speculative(model, {"p": torch.tensor([[1]])}, [{}], max_new_tokens=2,
                                                    repeats=1)
    assert comparison.first_divergence is None
    assert comparison.row()["first difference"] == "identical"


def test_speedup_is_per_generated_token() -> None:
    comparison = ss.Comparison("p", {}, 3, plain_tokens=40, speculative_tokens=20, plain_seconds=4.0,
                               speculative_seconds=1.0, acceptance_rate=0.5, tokens_per_step=2.0,
                               drafted_per_step=3.0, draft_ms_per_token=1.0, verify_ms_per_step=1.0,
                               first_divergence=None)
    assert comparison.speedup == pytest.approx(2.0)  # 0.1 s/token plain vs 0.05 s/token speculative
    comparison.plain_cpu_seconds, comparison.speculative_cpu_seconds = 4.0, 0.5  # 0.1 vs 0.025 s/token
    assert comparison.speedup_cpu == pytest.approx(4.0)


class SlowFakeModel(FakeSelfSpeculativeModel):
    """A fake whose plain calls burn 0.1 s of CPU and speculative calls sleep 0.2 s (wall time, no CPU)."""

    def generate(self, *args, **kwargs):
        import time

        if hasattr(self, "draft_model"):
            time.sleep(0.2)
        else:
            started = time.process_time()
            while time.process_time() - started < 0.1:
                pass
        return super().generate(*args, **kwargs)


def test_runs_record_wall_and_cpu_time_separately() -> None:
    model = SlowFakeModel(plain=[1, 2], speculative=[1, 2])
    run = ss.generate_greedy(model, torch.tensor([[1]]), max_new_tokens=2)
    assert run.seconds >= 0.2 and run.cpu_seconds < 0.1  # sleeping takes wall time, not CPU time
    [comparison] = ss.compare_plain_and_speculative(model, {"p": torch.tensor([[1]])}, [{}], max_new_tokens=2,
                                                    repeats=1)
    assert comparison.plain_cpu_seconds >= 0.1 and comparison.speculative_cpu_seconds < 0.1
    assert comparison.speculative_seconds >= 0.2
    assert comparison.speedup_cpu > 10  # by CPU time the sleeping speculative run is nearly free


def test_unknown_clock_is_refused() -> None:
    with pytest.raises(ss.SelfSpeculationError, match="clock"):
        ss.decode_step_seconds(FakeSelfSpeculativeModel([1], [1]), torch.tensor([[1]]), clock="gpu")


def test_sweep_settings_and_labels() -> None:
    settings = ss.sweep_settings((0.4, 0.8), (2,), auto_threshold=(True, False))
    assert settings == [{"th_stop_draft": 0.4, "auto_th_stop_draft": True},
                        {"th_stop_draft": 0.4, "auto_th_stop_draft": False},
                        {"th_stop_draft": 0.8, "auto_th_stop_draft": True},
                        {"th_stop_draft": 0.8, "auto_th_stop_draft": False},
                        {"max_step_draft": 2}]
    assert [ss.setting_label(s) for s in settings] == ["th=0.4 auto", "th=0.4 fixed", "th=0.8 auto",
                                                       "th=0.8 fixed", "max_step=2"]
    assert ss.setting_label({}) == "defaults"


# --------------------------------------------------------------------------- why outputs differ


class FakeLogitsModel(torch.nn.Module):
    """A forward pass returning fixed logits: row i prefers token `preferred[i]` by `margin`."""

    def __init__(self, preferred: list[int], margin: float) -> None:
        super().__init__()
        self.preferred, self.margin = preferred, margin

    def forward(self, sequence):
        logits = torch.zeros(1, sequence.shape[1], 10)
        for row, token in enumerate(self.preferred):
            logits[0, row, token] = self.margin
        return SimpleNamespace(logits=logits)


def test_argmax_flips_lists_positions_where_a_batched_pass_disagrees() -> None:
    # prompt of 2 tokens: rows 1, 2, 3 predict generated tokens 0, 1, 2
    model = FakeLogitsModel(preferred=[0, 4, 5, 9, 0], margin=0.125)
    flips = ss.argmax_flips(model, torch.tensor([[1, 2]]), [4, 6, 9], draft_hidden=False)
    assert flips == [{"position": 1, "greedy token": 6, "batched choice": 5, "logit margin": 0.125}]


def test_divergence_report_shows_both_continuations() -> None:
    decode = lambda ids: " ".join(str(i) for i in ids)  # noqa: E731
    report = ss.divergence_report(decode, [1, 2, 3], [1, 2, 4])
    assert "identical for 2 tokens" in report and "'3'" in report and "'4'" in report
    assert ss.divergence_report(decode, [1], [1]).startswith("identical (1 tokens)")


# --------------------------------------------------------------------------- cost model


def test_step_cost_fit_recovers_overhead_and_bandwidth() -> None:
    overhead, bandwidth = 0.010, 2e9
    step = lambda size: overhead + size / bandwidth  # noqa: E731
    fit = ss.fit_step_cost(step(2e8), step(5e7), 2e8, 5e7)
    assert fit["overhead_seconds"] == pytest.approx(overhead)
    assert fit["bytes_per_second"] == pytest.approx(bandwidth)


def test_cost_ratio_tends_to_the_byte_ratio_for_big_models() -> None:
    fit = {"overhead_seconds": 0.02, "bytes_per_second": 1e10}
    small, huge = ss.predicted_cost_ratio(1e8, fit), ss.predicted_cost_ratio(1e12, fit)
    assert small == pytest.approx((0.02 + 0.5625e8 / 1e10) / (0.02 + 2e8 / 1e10))  # overhead weighs in
    assert huge == pytest.approx(0.5625 / 2.0, rel=1e-3)
    assert small > ss.predicted_cost_ratio(7e9, fit) > huge


def test_fit_refuses_a_draft_that_is_not_cheaper() -> None:
    with pytest.raises(ss.SelfSpeculationError, match="not cheaper"):
        ss.fit_step_cost(0.05, 0.06, 2e8, 5e7)


# --------------------------------------------------------------------------- tables, JSON, subprocesses


def test_summary_rows_match_the_openvino_rows() -> None:
    comparison = ss.Comparison("p", {"th_stop_draft": 0.6}, 3, 10, 10, 1.0, 0.5, 0.5, 2.0, 3.0, 1.0, 1.0, None,
                               stats=ss.read_speculation_stats(ipex_counters()))
    [ipex_row] = ss.summary_rows([comparison], cost_ratio=0.7, precision="bf16")
    assert ipex_row["speed-up"] == pytest.approx(2.0)
    assert ipex_row["identical to plain"] is True
    openvino = {"cost_ratio": {"int4": 0.6}, "settings": {"num_assistant_tokens": 3}, "records": [
        {"mode": "speculative", "draft": "int4", "setting": "K=3", "prompt_id": "p", "input_tokens": 3,
         "generated_tokens": 10, "speedup_vs_plain": 1.1, "acceptance_rate": 0.8, "main_passes": 4,
         "tokens_per_step": [1, 4, 2, 2],
         "identical_to_plain": True, "first_difference": None, "precision": "f32"}]}
    [openvino_row] = openvino_summary_rows(openvino)
    assert list(ipex_row) == list(openvino_row)
    assert ipex_row["k"] == 3 and ipex_row["tokens/pass"] == pytest.approx(2.0)
    assert openvino_row["k"] == 3 and openvino_row["tokens/pass"] == pytest.approx(6 / 2)  # prefill and last passes left out


def test_formula_check_recovers_the_prediction_it_is_fed() -> None:
    from utils.speedup_model import expected_tokens_per_pass, predicted_speedup

    row = {"backend": "b", "draft": "d", "prompt": "p", "k": 4, "tokens/pass": expected_tokens_per_pass(0.7, 4),
           "cost ratio c": 0.5, "speed-up (CPU time)": 1.1, "speed-up": 1.2}
    [checked] = ss.formula_check([row])
    assert checked["a"] == pytest.approx(0.7, abs=1e-6)
    assert checked["predicted"] == pytest.approx(predicted_speedup(0.7, 4, 0.5))
    assert checked["measured (CPU time)"] == 1.1 and checked["measured (wall)"] == 1.2
    [clamped] = ss.formula_check([{**row, "tokens/pass": 6.5}])  # more than k + 1: IPEX-LLM's k varies per step
    assert clamped["a"] == pytest.approx(1.0, abs=1e-6)
    assert checked["predicted (measured passes)"] is None
    cost = {"backend": "b", "draft": "d", "prompt": "p", "verify pass / plain step": 1.0, "draft pass / plain step": 0.5}
    [same] = ss.formula_check([row], [cost])
    assert same["predicted (measured passes)"] == pytest.approx(same["predicted"])
    [dearer] = ss.formula_check([row], [{**cost, "verify pass / plain step": 1.3}])
    assert dearer["predicted (measured passes)"] < dearer["predicted"]


def test_step_costs_relate_passes_to_a_plain_step() -> None:
    comparison = ss.Comparison("p", {}, 3, plain_tokens=40, speculative_tokens=40, plain_seconds=4.0,
                               speculative_seconds=3.0, acceptance_rate=0.5, tokens_per_step=2.0,
                               drafted_per_step=3.0, draft_ms_per_token=50.0, verify_ms_per_step=120.0,
                               first_divergence=None)
    [row] = ss.step_costs([comparison])
    assert row["verify pass / plain step"] == pytest.approx(1.2)  # plain: 100 ms per token
    assert row["draft pass / plain step"] == pytest.approx(0.5)
    assert (row["backend"], row["draft"], row["prompt"]) == ("IPEX-LLM", "INT4 copy", "p")


def test_format_table() -> None:
    table = ss.format_table([{"a": 1.234, "b": None, "c": True}, {"a": 2, "b": "x", "c": False}])
    lines = table.splitlines()
    assert lines[0].split() == ["a", "b", "c"]
    assert lines[2].split() == ["1.23", "-", "yes"] and lines[3].split() == ["2", "x", "no"]
    assert ss.format_table([]) == "(no rows)"


def test_write_json_accepts_dataclasses(tmp_path: Path) -> None:
    stats = ss.read_speculation_stats(ipex_counters())
    path = ss.write_json(tmp_path / "deep" / "stats.json", {"stats": stats})
    assert json.loads(path.read_text())["stats"]["accepted"] == 5


def test_openvino_half_is_checked_up_front(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    (main / "openvino_model.xml").write_text("<net/>")
    ss.check_openvino_half(sys.executable, main, {"int4": main})
    with pytest.raises(ss.SelfSpeculationError, match="draft int8"):
        ss.check_openvino_half(sys.executable, main, {"int4": main, "int8": tmp_path / "missing"})
    with pytest.raises(ss.SelfSpeculationError, match="MAIN_PYTHON"):
        ss.check_openvino_half(tmp_path / "no-python", main, {})


def test_main_python_missing_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ss.SelfSpeculationError, match="tutorial.py lab"):
        ss.run_main_python(["utils.ov_self_speculation", "--help"], tmp_path / "no-python")


def test_main_python_runs_modules_from_the_repository_root() -> None:
    completed = ss.run_main_python(["utils.ov_self_speculation", "--help"], sys.executable)
    assert "--num-assistant-tokens" in completed.stdout
    with pytest.raises(RuntimeError, match="failed"):
        ss.run_main_python(["utils.ov_self_speculation", "--bogus"], sys.executable)


def test_module_imports_without_ipex_llm_or_openvino() -> None:
    code = ("import sys; sys.modules['ipex_llm'] = None; sys.modules['openvino'] = None; "
            "sys.modules['openvino_genai'] = None; import utils.ipex_self_speculation, utils.ov_self_speculation")
    completed = ss.subprocess.run([sys.executable, "-c", code], cwd=ss.REPO_ROOT, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
