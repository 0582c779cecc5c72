"""Fast tests for utils.training.draft_data (no model needed): openers, the chat template, describing the data."""
from __future__ import annotations

from draft_standins import pattern_data

from utils.training import draft_data as dd


def test_openers_are_steered_in_the_asked_share_and_deterministic() -> None:
    chosen = dd.choose_openers(40, 0.75, seed=3)
    assert len(chosen) == 40 and chosen == dd.choose_openers(40, 0.75, seed=3)
    tasks = [task for task, _ in chosen]
    # 30 steered prompts cycle through the 4 task types (8, 8, 7, 7); the 10 free ones are chat
    assert {task: tasks.count(task) for task in dd.TASK_OPENERS} == {
        "code": 8, "chat": 8 + 10, "summarisation": 7, "input_grounded": 7}
    assert all(opener in dd.TASK_OPENERS[task] for task, opener in chosen)
    assert dd.choose_openers(10, 0.0, seed=1) == [("chat", "")] * 10


def test_chat_template_parts_surround_the_user_message() -> None:
    class FakeTokenizer:
        def apply_chat_template(self, messages, add_generation_prompt):
            return f"<s>user\n{messages[0]['content']}</s>\n<s>assistant\n"

    before, after = dd.chat_template_parts(FakeTokenizer())
    assert before == "<s>user\n" and after == "</s>\n<s>assistant\n"


def test_benchmark_prompts_in_data_finds_a_leaked_prompt() -> None:
    from types import SimpleNamespace

    from utils.decoding.prompts import PROMPTS

    leaked, held_out = PROMPTS[0], PROMPTS[1]
    data = SimpleNamespace(samples=[SimpleNamespace(user_text="  ".join(leaked.text.split(" "))),
                                    SimpleNamespace(user_text="Write a haiku about rain.")])
    assert dd.benchmark_prompts_in_data(data, [leaked, held_out]) == [leaked.id]



def test_example_rows_show_a_few_greedy_samples_per_task_shortened() -> None:
    data = pattern_data(12)
    data.samples[0].user_text = "word " * 60
    rows = dd.example_rows(data, per_task=2, width=20)
    assert len(rows) == 2 and {row["task"] for row in rows} == {"chat"}
    assert rows[0]["prompt written by the main"] == "word " * 3 + "word…" and len(rows[0]["prompt written by the main"]) == 20
    assert rows[0]["opener"] == "(free)" and rows[0]["answer tokens"] == data.samples[0].answer_tokens
