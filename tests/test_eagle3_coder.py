"""`maintainers.eagle3_coder`: the Coder main's EAGLE-3 head - its teacher-forced data (a fake standard library and
a stand-in tokenizer: unit tests), its one-line errors, and the quick preset end to end on the real pair (models)."""
from __future__ import annotations

from pathlib import Path

import pytest

from maintainers import eagle3_coder as coder
from utils.training.scaffold import MainModel, TrainingError

END = 9999
BEFORE, AFTER = "<user>\n", "</user>\n<assistant>\n"


def encode(text: str) -> list[int]:
    """A stand-in tokenizer: one id per character (ids below `END`)."""
    return [ord(character) % END for character in text]


def decode(ids: list[int]) -> str:
    return "".join(chr(token) for token in ids)


def fake_stdlib(root: Path, modules: int = 12) -> Path:
    for index in range(modules):
        body = "".join(f"def function_{index}_{line}(x):\n    return x + {line}\n\n" for line in range(40))
        (root / f"module_{index:02d}.py").write_text(f'"""Module {index}."""\nimport os\n\n{body}', encoding="utf-8")
    for skipped in ("test/test_a.py", "idlelib/editor.py", "tkinter/test/test_widgets.py",
                    "site-packages/pkg/core.py", "__pycache__/x.py", "unittest/test_case_helper.py"):
        (root / skipped).parent.mkdir(parents=True, exist_ok=True)
        (root / skipped).write_text("x = 1\n" * 20, encoding="utf-8")
    (root / "tkinter").joinpath("__init__.py").write_text("import os\n" * 20, encoding="utf-8")
    return root


def settings(**overrides: object) -> coder.CoderHeadSettings:
    base = {"chunks": 6, "chunk_tokens": 120, "context_lines": 3, "held_out_files": 3, "sequence_length": 400}
    return coder.CoderHeadSettings.preset("quick", **(base | overrides))


def samples_of(root: Path, chosen: coder.CoderHeadSettings) -> tuple[list, list[str]]:
    candidates, held_out = coder.split_files(coder.stdlib_files(root), chosen.held_out_files, chosen.seed)
    return coder.make_samples(root, candidates, encode, (BEFORE, AFTER), chosen, END), held_out


def test_stdlib_files_leave_out_tests_idle_and_installed_packages(tmp_path: Path) -> None:
    files = coder.stdlib_files(fake_stdlib(tmp_path))
    assert "tkinter/__init__.py" in files and "module_00.py" in files
    assert not [name for name in files if name.startswith(("test/", "idlelib/", "site-packages/", "__pycache__/"))
                or "/test/" in name or Path(name).name.startswith("test_")]


def test_the_real_standard_library_has_enough_files_for_the_chunks_preset() -> None:
    chunks = coder.CoderHeadSettings.preset("chunks")
    assert len(coder.stdlib_files()) >= chunks.chunks + chunks.held_out_files


def test_samples_are_deterministic_and_never_use_held_out_files(tmp_path: Path) -> None:
    root = fake_stdlib(tmp_path)
    first, held_out = samples_of(root, settings())
    again, held_again = samples_of(root, settings())
    assert first == again and held_out == held_again
    assert len(first) == 6 and len(held_out) == 3
    used = {sample.opener for sample in first}
    assert not used & set(held_out)
    assert not [sample for sample in first for name in held_out if name in sample.user_text]
    other, other_held = samples_of(root, settings(seed=1))
    assert other_held != held_out or [s.token_ids for s in other] != [s.token_ids for s in first]


def test_each_sample_is_template_user_reply_chunk_and_the_turn_end(tmp_path: Path) -> None:
    root = fake_stdlib(tmp_path)
    chosen = settings()
    samples, _ = samples_of(root, chosen)
    for sample in samples:
        ids = sample.token_ids
        assert ids[-1] == END and END not in ids[:-1]
        assert len(ids) <= chosen.sequence_length
        assert ids[:sample.answer_start] == encode(BEFORE + sample.user_text + AFTER)
        assert sample.loss_start == len(encode(BEFORE))
        reply = decode(ids[sample.answer_start:-1])
        assert reply.startswith("```python\n") and reply.endswith("\n```")
        chunk = reply.removeprefix("```python\n").removesuffix("```")
        assert len(encode(chunk)) <= chosen.chunk_tokens
        assert chunk in (root / sample.opener).read_text(encoding="utf-8")
        assert sample.kind == "teacher-forced"


def test_too_few_files_or_too_short_a_sequence_fail_in_one_line(tmp_path: Path) -> None:
    root = fake_stdlib(tmp_path)
    with pytest.raises(TrainingError, match="usable standard-library files"):
        samples_of(root, settings(chunks=50))
    with pytest.raises(TrainingError, match="more than sequence_length"):
        samples_of(root, settings(sequence_length=100))


def test_the_data_recipe_follows_file_contents_and_names_the_held_out_files(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    root = fake_stdlib(tmp_path / "lib")
    main = MainModel(tmp_path / "main-ov", tmp_path / "main-hf")
    chosen = settings()
    samples, held_out = samples_of(root, chosen)
    used = sorted(sample.opener for sample in samples)
    recipe = coder.data_recipe(chosen, main, root, used, held_out)
    assert recipe["settings"]["held_out"] == held_out
    assert recipe["settings"]["python"].count(".") == 2
    (root / used[0]).write_text("changed = True\n", encoding="utf-8")
    assert coder.data_recipe(chosen, main, root, used, held_out) != recipe


def test_presets_stop_after_set_epochs() -> None:
    quick, chunks, reference = (coder.CoderHeadSettings.preset(name) for name in ("quick", "chunks", "reference"))
    assert reference.weight_format == "int8" and reference.draft_vocab_size == 8192 and reference.epochs > quick.epochs
    for preset in (quick, chunks):
        assert preset.chunk_tokens + coder.CONTEXT_TOKENS < preset.sequence_length
    assert coder.CoderMain(Path("a"), Path("qwen-hf")).stem == "qwen2.5-coder-1.5b"


def documented_stdlib(root: Path) -> Path:
    (root / "alpha.py").write_text(
        'def first(x, *, y=2):\n    """Return the first item of x, or y when x is empty.\n\n    More text."""\n\n'
        'def _private(x):\n    """A private helper that no prompt should name."""\n\n'
        'def undocumented(x):\n    return x\n\n'
        'class Box:\n    def second(self, z):\n        """Put z into the box and return the box."""\n\n'
        'def third(a):\n    """Compute the third thing from a, as a test."""\n', encoding="utf-8")
    (root / "beta.py").write_text('def other(q):\n    """Answer q with the other answer, politely."""\n',
                                  encoding="utf-8")
    (root / "broken.py").write_text("def (:\n", encoding="utf-8")
    return root


def test_docstring_prompts_name_documented_public_functions_a_few_per_file(tmp_path: Path) -> None:
    root = documented_stdlib(tmp_path)
    prompts = coder.docstring_prompts(root, ["broken.py", "alpha.py", "beta.py"], count=10, per_file=2)
    assert [path for path, _ in prompts] == ["alpha.py", "alpha.py", "beta.py"]
    texts = [text for _, text in prompts]
    assert "`first(x, *, y=2)`" in texts[0] and texts[0].endswith("Return the first item of x, or y when x is empty.")
    assert not [text for text in texts if "_private" in text or "undocumented" in text or "More text" in text]
    assert "`third(a)`" in texts[1] and "`alpha` module" in texts[1]  # module level first, then methods
    assert "`second(self, z)`" in coder.docstring_prompts(root, ["alpha.py"], count=10, per_file=3)[2][1]
    assert coder.docstring_prompts(root, ["alpha.py", "beta.py"], count=1) == prompts[:1]


def test_answer_samples_end_the_turn_only_where_the_main_stopped(tmp_path: Path, monkeypatch) -> None:
    from types import SimpleNamespace

    import numpy as np

    from utils.training import scaffold

    class FakeTokenizer:
        def get_eos_token_id(self) -> int:
            return 151643

        def apply_chat_template(self, messages, add_generation_prompt: bool) -> str:
            return BEFORE + messages[0]["content"] + AFTER

        def encode(self, text: str, add_special_tokens: bool = True):
            return SimpleNamespace(input_ids=SimpleNamespace(data=np.asarray([encode(text)])))

    answers = [[5, 6, coder.IM_END], [7] * 4, [151643]]  # ended its turn, ran to the limit, said nothing
    monkeypatch.setattr(scaffold, "data_pipeline",
                        lambda folder, batch: SimpleNamespace(get_tokenizer=lambda: FakeTokenizer()))
    monkeypatch.setattr(scaffold, "run_batched", lambda pipeline, requests, *rest: (answers[:len(requests)], 2.0))
    chosen = coder.CoderHeadSettings.preset("reference", answer_tokens=4, sequence_length=200)
    prompts = [("a.py", "write a"), ("b.py", "write b"), ("c.py", "write c")]
    samples, stats = coder.answer_samples(tmp_path, prompts, chosen, first_id=10, show_progress=False)
    assert [sample.opener for sample in samples] == ["a.py", "b.py"] and samples[0].sample_id == 10
    assert samples[0].token_ids[samples[0].answer_start:] == [5, 6, coder.IM_END]
    assert samples[1].token_ids[samples[1].answer_start:] == [7] * 4
    assert samples[0].token_ids[:samples[0].answer_start] == encode(BEFORE + "write a" + AFTER)
    assert stats["answers"] == 2 and stats["answer_tokens_generated"] == 8


def test_a_preset_needs_chunks_or_answers() -> None:
    with pytest.raises(TrainingError, match="chunks \\+ answers >= 1"):
        coder.CoderHeadSettings.preset("reference", answers=0)
    answers = coder.CoderHeadSettings.preset("reference")
    assert answers.chunks == 0 and answers.data_settings()["answers"] == answers.answers > 0
    assert coder.tapped_bytes(answers) > 0


def test_answers_per_file_is_checked_and_part_of_the_data_recipe() -> None:
    with pytest.raises(TrainingError, match="answers_per_file must be >= 1"):
        coder.CoderHeadSettings.preset("reference", answers_per_file=0)
    more = coder.CoderHeadSettings.preset("more-answers")
    assert more.data_settings()["answers_per_file"] == 3
    assert more.data_settings() != coder.CoderHeadSettings.preset("reference").data_settings()


def test_a_missing_pair_fails_before_any_work(tmp_models_dir: Path) -> None:
    with pytest.raises(TrainingError, match="qwen2.5-coder pair is not prepared"):
        coder.preflight(coder.CoderHeadSettings.preset("quick"))
    assert coder.main_command(["--preset", "quick", "--dry-run"]) == 1
    assert list(tmp_models_dir.iterdir()) == []


@pytest.fixture
def prepared_coder_pair() -> None:
    from utils.models import coder_pair

    if coder_pair.is_skipped():
        pytest.skip(f"{coder_pair.SKIP_ENV}=1: the Qwen2.5-Coder pair was opted out of")
    message = coder_pair.missing_pair_message()
    assert message is None, message


def test_quick_head_builds_and_genai_drafts_with_it_losslessly(prepared_coder_pair) -> None:
    import openvino_genai

    from utils.decoding.pipelines import main_model_properties, make_scheduler_config
    from utils.training.eagle3_checks import check_main
    from utils.training.eagle3_train import end_token_ids

    hf = coder.coder_main().hf
    # every end id the main's two config files name (the copy built from GGUF names <|im_end|> in both) stays in
    # the draft vocabulary
    assert coder.IM_END in end_token_ids(hf, check_main(hf))
    built = coder.build("quick", show_progress=False)
    assert built["training"]["output_rows_from"] == "lm_head"
    main = coder.coder_main().openvino
    exact = main_model_properties("f32")
    config = openvino_genai.GenerationConfig(max_new_tokens=12)
    prompt = "Write a Python function that reverses a list."
    plain = openvino_genai.LLMPipeline(str(main), "CPU", scheduler_config=make_scheduler_config(), **exact)
    reference = str(plain.generate(prompt, config))
    del plain
    draft = openvino_genai.draft_model(str(built["folders"].exported), "CPU", INFERENCE_PRECISION_HINT="f32")
    pipeline = openvino_genai.LLMPipeline(str(main), "CPU", scheduler_config=make_scheduler_config(),
                                          draft_model=draft, **exact)
    speculative = openvino_genai.GenerationConfig(max_new_tokens=12, num_assistant_tokens=3)
    assert str(pipeline.generate(prompt, speculative)) == reference


def test_end_token_ids_joins_both_config_files_without_repeats(tmp_path: Path) -> None:
    import json

    from utils.training.eagle3_train import end_token_ids

    assert end_token_ids(tmp_path, {"eos_token_id": 151645}) == [151645]  # no generation_config.json
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [151645, 151643]}))
    assert end_token_ids(tmp_path, {"eos_token_id": 151645}) == [151645, 151643]
    assert end_token_ids(tmp_path, {}) == [151645, 151643]
