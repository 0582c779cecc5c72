"""Tests of utils.tuning.task_tuner: prompt splits, the choice (plain unless a lossless candidate clearly wins), the
held-out check, on fabricated measurements (nothing is loaded)."""
from __future__ import annotations

import pytest
from fake_sweeps import fake_records

from utils.models.model_catalogue import ModelPair
from utils.tuning import sweeps, task_tuner
from utils.tuning.task_tuner import TaskChoice


def test_split_prompts_gives_each_task_disjoint_tuning_and_held_out_prompts() -> None:
    splits = task_tuner.split_prompts(["code", "chat", "input_grounded"])
    assert [split.task for split in splits] == ["code", "chat", "input_grounded"]
    for split in splits:
        assert split.tune.id != split.held_out.id
        assert all(p.task == split.task and p.length == "short" for p in (split.tune, split.held_out))


def test_split_prompts_says_what_to_do_when_a_task_has_too_few_prompts() -> None:
    with pytest.raises(ValueError, match="summarisation.*1 built-in short prompt.*length=None"):
        task_tuner.split_prompts(["summarisation"])
    assert task_tuner.split_prompts(["summarisation"], length=None)[0].held_out.task == "summarisation"
    with pytest.raises(ValueError, match="Unknown task 'poetry'"):
        task_tuner.split_prompts(["poetry"])


def test_candidate_points_cover_draft_k_threshold_and_prompt_lookup() -> None:
    points = task_tuner.candidate_points(ks=(2, 4), thresholds=(0.5,), lookup_ks=(3,), max_new_tokens=16)
    assert [task_tuner.describe(point) for point in points] == [
        "draft K=2", "draft K=4", "draft threshold=0.5", "prompt lookup K=3"]
    assert {point.settings.max_new_tokens for point in points} == {16}
    assert points[-1].pipeline.mode == "prompt_lookup" and points[-1].settings.max_ngram_size == 3
    assert task_tuner.describe(None) == "plain"
    with pytest.raises(ValueError, match="at least one candidate"):
        task_tuner.candidate_points(ks=(), thresholds=(), lookup_ks=())


def choice(task: str, speedup: float | None, identical: bool = True) -> TaskChoice:
    point = None if speedup == 1.0 else sweeps.k_points([3])[0]
    return TaskChoice(task, "a", "b", {}, task_tuner.describe(point), 1.0, speedup, identical, point is not None,
                      point)


def test_the_promise_is_at_most_three_percent_slower_and_lossless() -> None:
    assert choice("code", 0.97).never_worse() and not choice("code", 0.969).never_worse()
    assert not choice("code", 1.2, identical=False).never_worse()
    assert not choice("code", None).never_worse()
    choices = [choice("code", 1.2), choice("chat", 1.0), choice("input_grounded", 0.9)]
    assert task_tuner.summary_line(choices).endswith("lossless: no")
    assert "input_grounded (draft K=3, 0.90x" in task_tuner.summary_line(choices)
    assert task_tuner.summary_line(choices[:2]).endswith("lossless: yes")
    rows = task_tuner.choice_rows(choices)
    assert [r["at most 3% slower"] for r in rows] == [True, True, False]
    assert [r["chosen"] for r in rows] == ["draft K=3", "plain", "draft K=3"]
    assert "choice" not in choices[0].as_dict()


# Pretend speed-ups per (setting, prompt): code gains from the draft, chat gains from nothing, input-grounded gains
# from prompt lookup on the prompt it is tuned on but loses on the held-out one.
SPEEDUPS = {
    ("draft K=2", "code-fibonacci"): 1.15, ("draft K=4", "code-fibonacci"): 1.3,
    ("prompt lookup K=3", "code-fibonacci"): 0.8, ("draft K=4", "code-reverse"): 1.25,
    ("draft K=2", "chat-sky"): 1.03, ("draft K=4", "chat-sky"): 0.8, ("prompt lookup K=3", "chat-sky"): 0.9,
    ("draft K=2", "ground-dates"): 0.95, ("draft K=4", "ground-dates"): 0.9,
    ("prompt lookup K=3", "ground-dates"): 1.3, ("prompt lookup K=3", "ground-rename"): 0.9,
}


def fake_measure(calls: list):
    def measure(pool, points, prompts, *, warmup=1, repeats=2, progress=True):
        calls.append(([task_tuner.describe(point) for point in points], [p.id for p in prompts]))
        return [fake_records(point, prompts, lambda point, prompt: SPEEDUPS[(task_tuner.describe(point), prompt.id)])
                for point in points]
    return measure


def test_tune_tasks_chooses_per_task_and_checks_each_choice_on_held_out_prompts(
        fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list = []
    monkeypatch.setattr(sweeps, "measure_points", fake_measure(calls))
    splits = task_tuner.split_prompts(["code", "chat", "input_grounded"])
    points = task_tuner.candidate_points(ks=(2, 4), lookup_ks=(3,))
    tuning = task_tuner.tune_tasks(fake_pair, splits, points, progress=False)
    by_task = {c.task: c for c in tuning.choices}
    assert {(row["group"], row["value"]) for row in tuning.sweep.rows(by="task")} == {
        (task, value) for task in ("code", "chat", "input_grounded") for value in (2, 4, 3)}
    assert by_task["code"].label == "draft K=4" and by_task["code"].tune_speedup == pytest.approx(1.3)
    assert by_task["code"].held_out_speedup == pytest.approx(1.25) and by_task["code"].never_worse()
    assert by_task["chat"].label == "plain" and by_task["chat"].held_out_speedup == 1.0   # 1.03x is inside the margin
    assert not by_task["chat"].held_out_measured
    assert by_task["chat"].candidates == pytest.approx({"draft K=2": 1.03, "draft K=4": 0.8, "prompt lookup K=3": 0.9})
    assert by_task["input_grounded"].label == "prompt lookup K=3"
    assert by_task["input_grounded"].held_out_speedup == pytest.approx(0.9)
    assert not by_task["input_grounded"].never_worse()
    # Tuning measured every candidate on the tuning prompts only, in one interleaved run (the tuner's pool holds
    # plain, draft and prompt-lookup pipelines at once, so plain is timed once); each held-out check ran one choice
    # on the held-out prompts of the tasks that chose it; chat's held-out prompt was never run.
    tuning_prompts = ["code-fibonacci", "chat-sky", "ground-dates"]
    assert calls[:1] == [(["draft K=2", "draft K=4", "prompt lookup K=3"], tuning_prompts)]
    assert sorted(calls[1:]) == [(["draft K=4"], ["code-reverse"]), (["prompt lookup K=3"], ["ground-rename"])]
    assert "chat-sleep" not in str(calls)


def test_a_draft_variant_is_a_candidate_of_its_own_beside_the_default_draft(
        fake_pair: ModelPair, monkeypatch: pytest.MonkeyPatch) -> None:
    points = task_tuner.candidate_points(ks=(2,), lookup_ks=(), draft_variants=["int8"])
    assert [task_tuner.describe(point) for point in points] == ["draft K=2", "int8 K=2"]
    assert points[1].pipeline.draft_variant == "int8" and points[1].settings.name == "int8 K=2"
    speedups = {("draft K=2", "code-fibonacci"): 1.1, ("int8 K=2", "code-fibonacci"): 1.4,
                ("int8 K=2", "code-reverse"): 1.35}
    monkeypatch.setattr(sweeps, "measure_points", lambda pool, points, prompts, **_: [
        fake_records(point, prompts, lambda point, prompt: speedups[(task_tuner.describe(point), prompt.id)])
        for point in points])
    tuning = task_tuner.tune_tasks(fake_pair, task_tuner.split_prompts(["code"]), points, progress=False)
    chosen = tuning.choices[0]  # same knob and K, told apart by the pipeline
    assert chosen.candidates == pytest.approx({"draft K=2": 1.1, "int8 K=2": 1.4})
    assert chosen.label == "int8 K=2" and chosen.held_out_speedup == pytest.approx(1.35)
    with pytest.raises(KeyError, match="no draft variant 'int2'"):
        task_tuner.tune_tasks(fake_pair, task_tuner.split_prompts(["code"]),
                              task_tuner.candidate_points(ks=(2,), draft_variants=["int2"]), progress=False)


def test_tune_tasks_refuses_an_empty_task_list(fake_pair: ModelPair) -> None:
    with pytest.raises(ValueError, match="No task to tune"):
        task_tuner.tune_tasks(fake_pair, [], task_tuner.candidate_points())


def test_the_command_line_refuses_bad_input_before_loading_anything(capsys: pytest.CaptureFixture) -> None:
    from maintainers import tuner

    with pytest.raises(SystemExit):
        tuner.main(["--pair", "no-such-pair"])
    assert "Unknown model pair 'no-such-pair'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tuner.main(["--tasks", "summarisation"])
    assert "length=None" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tuner.main(["--json", "/proc/no-such-dir/out.json"])
    assert "--json" in capsys.readouterr().err
