"""Tests for utils.decoding.prompts: a well-formed prompt set with every task type and honest length classes."""
from __future__ import annotations

import pytest

from utils.decoding.prompts import LONG_PROMPT_MIN_TOKENS, PROMPTS, TASKS, Prompt, as_prompt, get_prompt, select_prompts


def test_ids_are_unique_and_every_task_has_prompts() -> None:
    ids = [prompt.id for prompt in PROMPTS]
    assert len(ids) == len(set(ids))
    for task in TASKS:
        assert sum(prompt.task == task for prompt in PROMPTS) >= 2, f"task {task} needs at least two prompts"
    assert any(prompt.length == "long" for prompt in PROMPTS)


def test_length_classes_match_the_offline_tokenizer(offline_pair) -> None:
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(offline_pair.main))
    for prompt in PROMPTS:
        count = tokenizer.encode(prompt.text, add_special_tokens=False).input_ids.data.shape[1]
        if prompt.length == "long":
            assert count >= LONG_PROMPT_MIN_TOKENS, f"{prompt.id} is marked long but has {count} tokens"
        else:
            assert count < LONG_PROMPT_MIN_TOKENS, f"{prompt.id} is marked short but has {count} tokens"


def test_input_grounded_and_summarisation_prompts_carry_their_input() -> None:
    """The instruction and the passage it works on, a blank line apart (either first), the passage the longer by
    far: prompt lookup copies from the prompt, so the input must be there."""
    for prompt in PROMPTS:
        if prompt.task not in ("input_grounded", "summarisation"):
            continue
        first, _, second = prompt.text.partition("\n\n")
        assert second.strip(), f"{prompt.id}: no passage beside its instruction (separate them by a blank line)"
        instruction, passage = sorted((first, second), key=lambda part: len(part.split()))
        assert len(passage.split()) > 2 * len(instruction.split()), f"{prompt.id}: no passage much longer than the ask"


def test_select_prompts() -> None:
    code = select_prompts(["code"])
    assert code and all(prompt.task == "code" for prompt in code)
    one_each = select_prompts(per_task=1)
    assert sorted(prompt.task for prompt in one_each) == sorted(TASKS)
    assert all(prompt.length == "long" for prompt in select_prompts(length="long"))
    with pytest.raises(ValueError, match="Unknown task"):
        select_prompts(["poetry"])
    with pytest.raises(ValueError, match="length"):
        select_prompts(length="medium")
    with pytest.raises(ValueError, match="per_task"):
        select_prompts(per_task=0)
    with pytest.raises(ValueError, match="No built-in prompt"):
        select_prompts(["chat"], length="long")


def test_get_prompt_and_as_prompt() -> None:
    assert get_prompt("chat-sky").task == "chat"
    with pytest.raises(KeyError, match="Known ids"):
        get_prompt("nope")
    custom = as_prompt("Hello", 3)
    assert (custom.id, custom.task, custom.text) == ("custom-3", "chat", "Hello")
    assert as_prompt(PROMPTS[0]) is PROMPTS[0]
    with pytest.raises(TypeError):
        as_prompt(42)


@pytest.mark.parametrize("fields, message", [
    ({"task": "poetry"}, "unknown task"),
    ({"length": "medium"}, "length"),
    ({"text": "  "}, "empty"),
])
def test_prompt_validation(fields: dict, message: str) -> None:
    arguments = {"id": "x", "task": "chat", "text": "hi", **fields}
    with pytest.raises(ValueError, match=message):
        Prompt(**arguments)
