"""Fast tests for utils.training.scaffold: presets, recipes that know their code, openers, the chat template,
held-out prompts and the learning-rate schedule. No model is loaded."""
from __future__ import annotations

from pathlib import Path

import pytest

from utils.training import scaffold
from utils.training.draft_settings import DraftTrainingSettings
from utils.training.eagle3_settings import Eagle3Settings


def test_each_model_has_its_presets_and_refuses_unknown_names_and_settings() -> None:
    assert DraftTrainingSettings.preset("full").prompts > DraftTrainingSettings.preset("quick").prompts
    assert Eagle3Settings.preset("reference").weight_format == "int8"
    assert "reference" not in DraftTrainingSettings.PRESETS and "full" not in Eagle3Settings.PRESETS
    with pytest.raises(scaffold.TrainingError, match="Unknown preset 'huge'"):
        DraftTrainingSettings.preset("huge")
    with pytest.raises(scaffold.TrainingError, match="Unknown settings"):
        Eagle3Settings.preset("quick", learning_rte=1e-3)
    own = DraftTrainingSettings(prompts=5)
    assert DraftTrainingSettings.preset(own) is own


def test_training_stops_after_set_epochs_never_minutes() -> None:
    for settings in (*DraftTrainingSettings.PRESETS.values(), *Eagle3Settings.PRESETS.values()):
        assert not any("minutes" in key or "seconds" in key for key in settings.as_dict())


def test_the_code_fingerprint_ignores_docstrings_comments_and_layout_but_not_code() -> None:
    base = scaffold.source_fingerprint('def f(x):\n    """Doc."""\n    return x + 1\n')
    assert scaffold.source_fingerprint("def f(x):  # a comment\n\n    return (x + 1)\n") == base
    assert scaffold.source_fingerprint('def f(x):\n    """Other doc."""\n    return x + 2\n') != base


def test_a_recipe_changes_when_the_code_that_builds_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def recipe() -> dict:
        return scaffold.stage_recipe("head", {"epochs": 3.0}, [tmp_path / "hidden"], ("torch",),
                                     ("utils.training.eagle3_train",))

    before = recipe()
    assert recipe() == before and before["code"]
    real = scaffold.source_fingerprint
    monkeypatch.setattr(scaffold, "source_fingerprint",
                        lambda source: real(source.replace("step_weight ** step", "step_weight ** (step + 1)")))
    assert recipe()["code"] != before["code"]


def test_openers_are_steered_in_the_asked_share_and_deterministic() -> None:
    chosen = scaffold.choose_openers(40, 0.75, seed=3)
    assert len(chosen) == 40 and chosen == scaffold.choose_openers(40, 0.75, seed=3)
    tasks = [task for task, _ in chosen]
    # 30 steered prompts cycle through the 4 task types (8, 8, 7, 7); the 10 free ones are chat
    assert {task: tasks.count(task) for task in scaffold.TASK_OPENERS} == {
        "code": 8, "chat": 8 + 10, "summarisation": 7, "input_grounded": 7}
    assert all(opener in scaffold.TASK_OPENERS[task] for task, opener in chosen)
    assert scaffold.choose_openers(10, 0.0, seed=1) == [("chat", "")] * 10


def test_chat_template_parts_surround_the_user_message() -> None:
    class FakeTokenizer:
        def apply_chat_template(self, messages, add_generation_prompt):
            return f"<s>user\n{messages[0]['content']}</s>\n<s>assistant\n"

    assert scaffold.chat_template_parts(FakeTokenizer()) == ("<s>user\n", "</s>\n<s>assistant\n")


def test_held_out_prompts_are_found_whatever_their_spacing() -> None:
    written = ["Write a Python function that adds two numbers.", "Why   is the sky\nblue?"]
    assert scaffold.held_out_overlap(written, ["Why is the sky blue?", "Summarise this."]) == ["Why is the sky blue?"]
    assert scaffold.held_out_overlap(written, ["Tell me a joke."]) == []


def test_the_learning_rate_warms_up_then_decays_to_its_floor() -> None:
    rates = [scaffold.learning_rate(step, 100, 1.0, 10) for step in range(101)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(rates[10:-1], rates[11:], strict=True)) and rates[100] == pytest.approx(0.1)


def test_samples_and_their_statistics_round_trip(tmp_path: Path) -> None:
    samples = [scaffold.Sample(0, "code", "How do I", "greedy", "How do I sort?", [1, 2, 3, 4, 5], 1, 3)]
    scaffold.save_samples(samples, tmp_path, {"samples": 1})
    assert scaffold.load_samples(tmp_path) == samples and scaffold.load_stats(tmp_path) == {"samples": 1}
    assert samples[0].answer_tokens == 2


def test_a_training_stops_after_its_epochs_rounded_up_to_a_whole_step() -> None:
    from utils.training.scaffold import training_steps

    assert [training_steps(10, epochs) for epochs in (0.25, 1, 2.01, 0)] == [3, 10, 21, 1]
