"""Tests for `python -m maintainers.benchmark`: it runs, refuses bad input before loading models, and its records agree.

A benchmark, not a test of speed: nothing here asserts a timing.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from maintainers import benchmark
from utils.decoding.pipelines import SpeculationSetupError
from utils.input_checks import InputError
from utils.models.model_check import ModelFolderError, TokenizerMismatchError
from utils.paths import REPO_ROOT


def plan(*argv: str):
    return benchmark.plan_benchmark(benchmark.build_parser().parse_args(list(argv)))


def test_help_runs_as_a_module() -> None:
    result = subprocess.run([sys.executable, "-m", "maintainers.benchmark", "--help"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    for option in ("--pair", "--draft", "--precision", "--threshold", "--json", "--repeats", "--warmup"):
        assert option in result.stdout


def test_default_plan_on_the_offline_pair(offline_pair) -> None:
    default = plan()
    assert default.main_dir == offline_pair.main and default.draft_dir == offline_pair.draft
    assert [settings.mode for settings in default.settings] == ["plain", "speculative", "prompt_lookup"]
    assert {prompt.task for prompt in default.prompts} == {"code", "chat", "summarisation", "input_grounded"}
    int8 = plan("--draft", "int8", "-k", "2", "4", "--precision", "f32", "--tasks", "code", "--per-task", "1")
    assert int8.draft_dir == offline_pair.int8 and int8.precision == "f32"
    assert [settings.label for settings in int8.settings] == ["greedy", "K=2", "K=4", "K=3, ngram=3"]
    assert len(int8.prompts) == 1
    dynamic = plan("--threshold", "0.3", "0.6", "--modes", "plain", "speculative")
    assert [settings.label for settings in dynamic.settings] == ["greedy", "threshold=0.3", "threshold=0.6"]
    lookup_only = plan("--modes", "plain", "prompt_lookup")
    assert lookup_only.draft_dir is None
    assert default.draft_precision is None  # the draft runs at the main model's precision
    assert plan("--precision", "f32", "--draft-precision", "bf16").draft_precision == "bf16"
    assert default.target_speedup == 1.5 and plan("--target-speedup", "2").target_speedup == 2.0


def test_the_draft_precision_reaches_the_speculative_pipeline_only(offline_pair, monkeypatch) -> None:
    loaded = {}

    def record_load(mode, main_dir, device, **options):
        loaded[mode] = options
        raise StopIteration  # enough: nothing is measured

    monkeypatch.setattr(benchmark, "load_pipeline", record_load)
    checked = plan("--precision", "f32", "--draft-precision", "bf16", "--modes", "speculative", "plain")
    for mode in ("plain", "speculative"):
        with pytest.raises(StopIteration):
            benchmark.run_benchmark(replace(checked, settings=[
                settings for settings in checked.settings if settings.mode == mode]))
    assert loaded["speculative"]["draft_precision"] == "bf16" and loaded["speculative"]["precision"] == "f32"
    assert loaded["plain"]["draft_precision"] is None and loaded["plain"]["precision"] == "f32"
    assert loaded["plain"]["exact_main"] is True and loaded["speculative"]["exact_main"] is True
    # --fast-main reaches every pipeline: plain and speculative must share the main model's arithmetic
    fast = plan("--precision", "f32", "--fast-main", "--modes", "plain", "prompt_lookup")
    assert fast.exact_main is False
    for mode in ("plain", "prompt_lookup"):
        with pytest.raises(StopIteration):
            benchmark.run_benchmark(replace(fast, settings=[
                settings for settings in fast.settings if settings.mode == mode]))
        assert loaded[mode]["exact_main"] is False


@pytest.mark.parametrize("argv, error, message", [
    (["-k", "0"], SpeculationSetupError, "integer >= 1"),
    (["-k", "3", "--threshold", "0.4"], SpeculationSetupError, "not both"),
    (["--threshold", "1.5"], SpeculationSetupError, "between 0 and 1"),
    (["--pair", "nope"], SpeculationSetupError, "Known pairs"),
    (["--draft", "int2"], SpeculationSetupError, "Known variants"),
    (["--modes", "speculative"], SpeculationSetupError, "must include plain"),
    (["--repeats", "0"], SpeculationSetupError, "--repeats"),
    (["--ngram", "0"], SpeculationSetupError, "max_ngram_size"),
    (["--lookup-k", "0"], SpeculationSetupError, "num_assistant_tokens"),
    (["--draft-dir", "/no/such/draft"], ModelFolderError, "does not exist"),
    (["--threads", "0"], InputError, "--threads must be an integer >= 1, got 0"),
    (["--device", "NPU"], InputError, "no NPU device.*Use one of: .*CPU"),
    (["--threshold", "0.4", "--modes", "plain", "prompt_lookup"], SpeculationSetupError,
     "--threshold only apply to speculative decoding.*add speculative to --modes"),
    (["-k", "2", "--modes", "plain"], SpeculationSetupError, "-k only apply to speculative"),
    (["--draft-precision", "bf16", "--modes", "plain", "prompt_lookup"], SpeculationSetupError,
     "--draft-precision only apply to speculative"),
    (["--ngram", "2", "--lookup-k", "4", "--modes", "plain", "speculative"], SpeculationSetupError,
     "--lookup-k and --ngram only apply to prompt_lookup"),
    (["--max-new-tokens", "9000"], InputError, "leaves no room for a prompt in the 8192-token context"),
    (["--json", "/proc/bench.json"], InputError, "--json /proc/bench.json cannot be written"),
    (["--target-speedup", "0"], ValueError, "--target-speedup must be > 0"),
    (["--fast-main"], ValueError, "--fast-main only changes an f32 main model.*add --precision f32"),
])
def test_bad_arguments_fail_before_loading(argv, error, message, offline_pair, no_model_loading) -> None:
    with pytest.raises(error, match=message):
        plan(*argv)


def test_device_is_case_insensitive_and_lookup_defaults_hold(offline_pair, no_model_loading) -> None:
    checked = plan("--device", "cpu")
    assert checked.device == "CPU"
    assert [settings.label for settings in checked.settings][-1] == "K=3, ngram=3"
    assert [settings.label for settings in plan("--lookup-k", "5").settings][-1] == "K=5, ngram=3"


def test_json_path_is_checked_before_measuring(tmp_path: Path, capsys, offline_pair, no_model_loading) -> None:
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main(["--json", str(tmp_path)])  # a folder, not a file
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "--json" in error and "is a folder" in error and "Traceback" not in error


def test_a_prompt_longer_than_the_context_is_reported_before_measuring(offline_pair, monkeypatch) -> None:
    """run_benchmark encodes every prompt first: a prompt that does not fit stops it before any timed run."""
    from utils.decoding.prompts import Prompt

    monkeypatch.setattr(benchmark, "measure_side_by_side", lambda *a, **k: pytest.fail("measured a bad plan"))
    checked = plan("--modes", "plain", "--max-new-tokens", "64", "--tasks", "chat", "--per-task", "1")
    long_prompt = Prompt("too-long", "chat", "The library opens at nine. " * 1500, length="long")
    with pytest.raises(InputError, match="prompt too-long.*Shorten the prompt"):
        benchmark.run_benchmark(replace(checked, prompts=[*checked.prompts, long_prompt]))


def test_gguf_and_mismatched_drafts_are_refused(tmp_path: Path, offline_pair, no_model_loading) -> None:
    from utils.models.tokenizer_mismatch_demo import make_mismatched_draft

    gguf = tmp_path / "draft.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(SpeculationSetupError, match="GGUF"):
        plan("--draft-dir", str(gguf))
    mismatched = make_mismatched_draft(offline_pair.draft, tmp_path / "mismatched")
    with pytest.raises(TokenizerMismatchError):
        plan("--draft-dir", str(mismatched))
    with pytest.raises(SpeculationSetupError, match="--draft-dir too"):
        plan("--main-dir", str(offline_pair.main))


def test_single_thread_bf16_is_refused_before_loading(offline_pair, no_model_loading) -> None:
    import openvino as ov

    if "bf" not in str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")):
        pytest.skip("the OpenVINO crash this guards against needs a CPU that defaults to bf16")
    with pytest.raises(SpeculationSetupError, match="floating point exception"):
        plan("--threads", "1", "--precision", "default")
    assert plan("--threads", "1", "--precision", "f32").threads == 1


@pytest.mark.parametrize("argv, message", [
    (["-k", "0"], "num_assistant_tokens (K) must be an integer >= 1"),
    (["--threads", "0"], "--threads must be an integer >= 1"),
    (["--device", "gpu.7"], "no GPU.7 device"),
])
def test_cli_reports_bad_input_as_a_usage_error(capsys, offline_pair, no_model_loading, argv, message) -> None:
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


def test_a_small_run_prints_the_table_and_writes_consistent_json(tmp_path: Path, capsys, offline_pair) -> None:
    output = tmp_path / "bench.json"
    code = benchmark.main(["--precision", "f32", "--tasks", "input_grounded", "--per-task", "1",
                           "--max-new-tokens", "12", "--warmup", "0", "--repeats", "1", "--threads", "1",
                           "--target-speedup", "1.2", "--json", str(output)])
    assert code == 0
    printed = capsys.readouterr().out
    for column in ("mode", "setting", "task", "seconds", "tokens", "tokens/s", "speed-up", "acceptance rate", "identical"):
        assert column in printed
    document = json.loads(output.read_text())
    records = document["records"]
    assert [record["mode"] for record in records] == ["plain", "speculative", "prompt_lookup"]
    assert document["plan"]["precision"] == "f32" and document["machine"]["cpu_count"]
    assert document["plan"]["draft_precision"] is None and document["plan"]["exact_main"] is True
    assert "AVX512_VNNI" in document["machine"]["cpu"]["features"]  # what decides int4 speed and exactness
    plain = records[0]
    for record in records:
        assert record["prompt_id"] == plain["prompt_id"] and record["precision"] == "f32"
        assert record["generated_tokens"] == len(record["token_ids"])
        assert sum(record["tokens_per_step"]) == record["generated_tokens"]
        # f32 greedy: speculation is lossless, so every run is identical to plain and comparable
        assert record["identical_to_plain"] is True
        assert record["speedup_vs_plain"] == pytest.approx(plain["wall_seconds"] / record["wall_seconds"])
        assert record["setting"] in printed
    assert {row["mode"] for row in document["summary"]} == {"plain", "speculative", "prompt_lookup"}
    # the formula beside the measurement: one row for the one task at K=3, from this run's own records
    from utils.decoding.decoding_metrics import tokens_per_main_pass

    (formula,) = document["formula"]
    assert (formula["setting"], formula["task"], formula["identical"]) == ("K=3", "input_grounded", "1/1")
    speculative = records[1]
    assert formula["tokens per main pass"] == pytest.approx(tokens_per_main_pass(speculative["tokens_per_step"]))
    assert formula["measured speed-up"] == pytest.approx(speculative["speedup_vs_plain"])
    assert 0 < formula["cost ratio c"] and 0 <= formula["per-token acceptance a"] <= 1 and formula["predicted (Leviathan)"] > 0
    assert "formula beside the measurement" in printed and "predicted (Leviathan)" in printed
    # the draft's budget for the asked speed-up, named after it in the JSON and the printed table
    assert document["plan"]["target_speedup"] == 1.2 and "draft / plain for 1.2x" in formula
    assert "draft / plain for 1.2x" in printed and formula["draft / plain"] > 0
    assert list(document["best_by_task"]) == ["input_grounded"]  # the one task of this run, its best setting
    assert document["best_by_task"]["input_grounded"]["setting"] in {"K=3", "K=3, ngram=3"}
    assert "best lossless per task: input_grounded: " in printed
    best = [line for line in printed.splitlines() if line.startswith("best lossless configuration: ")]
    assert len(best) == 1 and "--tasks input_grounded" in best[0] and "python -m maintainers.benchmark" in best[0]
    assert any(f"{row['mode']} {row['setting']}," in best[0] for row in document["summary"] if row["mode"] != "plain")


def summary_row(mode: str, setting: str, speedup: float | None, prompts: int = 3, comparable: int = 3,
                identical: int = 3) -> dict:
    return {"mode": mode, "setting": setting, "speedup_vs_plain": speedup, "prompts": prompts,
            "comparable_prompts": comparable, "identical_prompts": identical}


def test_best_lossless_takes_the_fastest_setting_that_matched_plain_everywhere() -> None:
    from maintainers.benchmark import best_lossless

    rows = [summary_row("plain", "greedy", 1.0),
            summary_row("speculative", "K=2", 1.10),
            summary_row("speculative", "K=4", 1.30, identical=2),        # faster, but one output differed
            summary_row("prompt_lookup", "K=3 n=3", 1.25, comparable=2),  # one prompt wrote fewer tokens
            summary_row("speculative", "K=3", 1.20)]
    assert best_lossless(rows)["setting"] == "K=3"
    assert best_lossless(rows[:1]) is None  # plain decoding is not a configuration to recommend
    assert best_lossless([summary_row("speculative", "K=2", None, comparable=0)]) is None


def test_best_lossless_by_task_takes_each_task_alone() -> None:
    """On the committed fast-main run: code's best is the formula table's best code row, not the pooled best."""
    from maintainers.benchmark import best_by_task_line, best_lossless, best_lossless_by_task
    from utils.decoding.generation import GenerationRecord
    from utils.decoding.generation_reports import formula_by_task, summarise
    from utils.paths import REPO_ROOT

    document = json.loads((REPO_ROOT / "docs" / "data" / "benchmark-qwen2.5-coder-fast-main.json").read_text())
    records = [GenerationRecord.from_dict(record) for record in document["records"]]
    by_task = best_lossless_by_task(records)
    assert list(by_task) == ["code", "input_grounded"]
    code = max((row for row in formula_by_task(records) if row["task"] == "code"),
               key=lambda row: row["measured speed-up"])
    assert (by_task["code"]["mode"], by_task["code"]["setting"]) == ("speculative", code["setting"])
    assert by_task["code"]["speedup_vs_plain"] == pytest.approx(code["measured speed-up"])
    assert by_task["code"]["prompts"] == 2
    pooled = best_lossless(summarise(records))
    for task, best in by_task.items():  # each task's own best is at least as fast there as the pooled choice
        (pooled_there,) = [row for row in summarise([record for record in records if record.task == task])
                           if row["setting"] == pooled["setting"]]
        assert best["speedup_vs_plain"] >= pooled_there["speedup_vs_plain"]
    assert any(best["setting"] != pooled["setting"] for best in by_task.values())  # and not always the same
    assert best_by_task_line(records).startswith(
        f"best lossless per task: code: speculative {code['setting']}, {code['measured speed-up']:.2f}x (2 prompts); "
        "input_grounded: prompt_lookup")
    # a task whose only other run changed the output has no lossless setting
    changed = [replace(record, identical_to_plain=False) if record.mode != "plain" else record for record in records]
    assert best_lossless_by_task(changed) == {"code": None, "input_grounded": None}
    assert best_by_task_line(changed) == "best lossless per task: code: none; input_grounded: none"


@pytest.mark.parametrize("seed", ["-1", str(benchmark.RNG_SEED_MAX + 1)])
def test_a_seed_openvino_cannot_take_is_refused_first(seed: str, capsys, no_model_loading) -> None:
    """Checked before anything else (no model folder needed), as a one-line usage error naming the range."""
    with pytest.raises(InputError, match=rf"--seed must be an integer from 0 to {benchmark.RNG_SEED_MAX}, got {seed}"):
        plan("--seed", seed, "--sample")
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main(["--seed", seed, "--sample"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "--seed must be an integer from 0 to 18446744073709551615" in error
    assert "Traceback" not in error and "TypeError" not in error


def test_the_seed_range_is_what_generation_config_accepts() -> None:
    import openvino_genai

    config = openvino_genai.GenerationConfig()
    for accepted in (0, benchmark.RNG_SEED_MAX):
        config.rng_seed = accepted
        assert config.rng_seed == accepted
    for refused in (-1, benchmark.RNG_SEED_MAX + 1):
        with pytest.raises(TypeError):
            config.rng_seed = refused


def test_several_drafts_are_measured_side_by_side_each_with_its_own_pipeline(offline_pair, monkeypatch) -> None:
    two = plan("--draft", "default", "int8", "-k", "2", "4", "--modes", "plain", "speculative")
    assert two.drafts == {"default": offline_pair.draft, "int8": offline_pair.int8}
    assert [settings.label for settings in two.settings] == ["greedy", "default K=2", "int8 K=2", "default K=4",
                                                             "int8 K=4"]
    loaded = []

    def record_load(mode, main_dir, device, **options):
        loaded.append((mode, options["draft_dir"]))
        return type("Loaded", (), {"mode": mode, "tokenizer": None})()

    monkeypatch.setattr(benchmark, "load_pipeline", record_load)
    monkeypatch.setattr(benchmark, "check_prompts_fit", lambda *args: None)
    measured = {}
    monkeypatch.setattr(benchmark, "measure_side_by_side",
                        lambda candidates, *args, **kwargs: measured.setdefault("candidates", candidates) and [])
    benchmark.run_benchmark(two)
    assert loaded == [("plain", None), ("speculative", offline_pair.draft), ("speculative", offline_pair.int8)]
    drafts_used = [(settings.label, pipeline) for pipeline, settings in measured["candidates"]]
    assert drafts_used[1][1] is drafts_used[3][1] and drafts_used[2][1] is drafts_used[4][1]
    assert drafts_used[1][1] is not drafts_used[2][1]


def test_a_head_variant_needs_the_coder_pair_and_a_built_head(offline_pair, tmp_path: Path, monkeypatch,
                                                              no_model_loading) -> None:
    with pytest.raises(SpeculationSetupError, match="add --pair qwen2.5-coder"):
        plan("--draft", "eagle3-quick")
    from maintainers import eagle3_coder

    monkeypatch.setattr(eagle3_coder, "coder_main",
                        lambda: eagle3_coder.CoderMain(tmp_path / "main-ov", tmp_path / "main-hf", "main"))
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    with pytest.raises(SpeculationSetupError, match="python -m maintainers.eagle3_coder --preset quick"):
        benchmark.coder_head_folder("eagle3-quick")


def test_a_head_folder_is_checked_as_a_head(offline_pair, tmp_path: Path, no_model_loading) -> None:
    from utils.training.scaffold import TrainingError

    head = tmp_path / "head"
    head.mkdir()
    (head / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    assert benchmark.is_eagle3_head(head) and not benchmark.is_eagle3_head(offline_pair.draft)
    with pytest.raises(TrainingError, match="no openvino_model.xml: export the head first"):
        plan("--draft-dir", str(head))
