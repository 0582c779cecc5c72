"""Fast tests for utils.draft_training: tiny models and synthetic data, no real model needed."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from utils import draft_training as dt  # noqa: E402
from utils.atomic_folder import atomic_folder, read_marker  # noqa: E402

VOCAB = 40


def tiny_settings(**changes) -> dt.DraftTrainingSettings:
    base = dict(name="tiny", prompts=2, hidden_size=8, layers=1, attention_heads=2, key_value_heads=1,
                intermediate_size=16, epochs=30.0, max_training_minutes=5.0, batch_size=4, learning_rate=1e-2,
                warmup_steps=0, teacher_top_k=0, distill_weight=0.0, seed=0)
    base.update(changes)
    return dt.DraftTrainingSettings(**base)


def tiny_main_config():
    return transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                    num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
                                    bos_token_id=1, eos_token_id=2, pad_token_id=2, max_position_embeddings=128)


def pattern_data(samples: int = 12, with_teacher: bool = False) -> dt.TrainingData:
    """Sequences that count upwards from 10 (mod 30, +10): easy to learn, uses only some of the vocabulary."""
    rows = []
    for index in range(samples):
        start = index % 7
        prefix = [1, 3, 4]  # "template": not scored
        body = [10 + (start + step) % 20 for step in range(12)]
        rows.append(dt.Sample(sample_id=index, task="chat", opener="", kind="greedy" if index % 2 == 0 else "sampled",
                              user_text=f"prompt {index // 2}", token_ids=prefix + body + [2], loss_start=3,
                              answer_start=6))
    data = dt.TrainingData(rows, stats={"tokens_generated": 0})
    if with_teacher:
        total = sum(len(s.token_ids) for s in rows)
        ids = np.zeros((total, 2), dtype=np.int32)
        logprobs = np.log(np.tile(np.array([[0.9, 0.1]], dtype=np.float16), (total, 1)))
        position = 0
        for sample in rows:
            for j, token in enumerate(sample.token_ids):
                following = sample.token_ids[j + 1] if j + 1 < len(sample.token_ids) else 2
                ids[position] = [following, 10]
                position += 1
        data.teacher_ids, data.teacher_logprobs = ids, logprobs.astype(np.float16)
    return data


# --------------------------------------------------------------------------- settings


def test_settings_reject_bad_values_and_presets_exist() -> None:
    with pytest.raises(dt.DraftTrainingError, match="multiple of attention_heads"):
        dt.DraftTrainingSettings(hidden_size=250, attention_heads=4)
    with pytest.raises(dt.DraftTrainingError, match="teacher_top_k"):
        dt.DraftTrainingSettings(teacher_top_k=0, distill_weight=0.5)
    with pytest.raises(dt.DraftTrainingError, match="prompts"):
        dt.DraftTrainingSettings(prompts=0)
    with pytest.raises(dt.DraftTrainingError, match="Unknown training size"):
        dt.get_settings("huge")
    assert dt.get_settings("quick").name == "quick" and dt.get_settings("full").name == "full"
    assert dt.get_settings("full").prompts > dt.get_settings("quick").prompts


def test_recipes_split_data_and_training_settings() -> None:
    settings = dt.get_settings("quick")
    assert "prompts" in settings.data_settings() and "prompts" not in settings.draft_settings()
    assert "hidden_size" in settings.draft_settings() and "hidden_size" not in settings.data_settings()
    changed = dt.DraftTrainingSettings(learning_rate=settings.learning_rate * 2)
    assert changed.data_settings() == settings.data_settings()
    assert changed.draft_settings() != settings.draft_settings()


def test_openers_are_steered_in_the_asked_share_and_deterministic() -> None:
    chosen = dt.choose_openers(40, 0.75, seed=3)
    assert len(chosen) == 40 and chosen == dt.choose_openers(40, 0.75, seed=3)
    tasks = [task for task, _ in chosen]
    # 30 steered prompts cycle through the 4 task types (8, 8, 7, 7); the 10 free ones are chat
    assert {task: tasks.count(task) for task in dt.TASK_OPENERS} == {
        "code": 8, "chat": 8 + 10, "summarisation": 7, "input_grounded": 7}
    assert all(opener in dt.TASK_OPENERS[task] for task, opener in chosen)
    assert dt.choose_openers(10, 0.0, seed=1) == [("chat", "")] * 10


def test_chat_template_parts_surround_the_user_message() -> None:
    class FakeTokenizer:
        def apply_chat_template(self, messages, add_generation_prompt):
            return f"<s>user\n{messages[0]['content']}</s>\n<s>assistant\n"

    before, after = dt.chat_template_parts(FakeTokenizer())
    assert before == "<s>user\n" and after == "</s>\n<s>assistant\n"


# --------------------------------------------------------------------------- vocabulary and embeddings


def test_vocabulary_subset_round_trips_and_flags_missing_tokens() -> None:
    subset = dt.VocabularySubset.from_token_ids([7, 3, 3, 12, 39], VOCAB)
    assert subset.global_ids.tolist() == [3, 7, 12, 39] and len(subset) == 4 and subset.vocab_size == VOCAB
    ids = torch.tensor([[12, 3], [39, 7]])
    assert torch.equal(subset.to_global(subset.to_local(ids)), ids)
    assert subset.to_local_or_missing(torch.tensor([5, 7])).tolist() == [-1, 1]
    with pytest.raises(dt.DraftTrainingError):
        subset.to_local(torch.tensor([5]))
    with pytest.raises(dt.DraftTrainingError):
        dt.VocabularySubset.from_token_ids([VOCAB], VOCAB)
    assert len(dt.VocabularySubset.full(VOCAB)) == VOCAB


def test_projected_embeddings_keep_dot_products_better_than_a_random_projection() -> None:
    torch.manual_seed(0)
    main = torch.randn(VOCAB, 16) @ torch.diag(torch.linspace(3, 0.1, 16))
    projected = dt.projected_embeddings(main, 4)
    assert projected.shape == (VOCAB, 4)
    random_basis, _ = torch.linalg.qr(torch.randn(16, 4))
    gram = main @ main.T
    error_projected = (gram - projected @ projected.T).norm()
    error_random = (gram - (main @ random_basis) @ (main @ random_basis).T).norm()
    assert error_projected < error_random
    assert torch.equal(dt.projected_embeddings(main, 16), main)
    with pytest.raises(dt.DraftTrainingError, match="wider"):
        dt.projected_embeddings(main, 32)


def test_tiny_draft_shares_vocabulary_and_special_tokens_with_the_main() -> None:
    config = tiny_main_config()
    settings = tiny_settings()
    initial = dt.projected_embeddings(torch.randn(VOCAB, 16), settings.hidden_size)
    subset = dt.VocabularySubset.from_token_ids([2, 5, 9, 20], VOCAB)
    compact = dt.build_draft(config, initial, settings, subset)
    assert compact.config.vocab_size == 4
    assert torch.equal(compact.get_input_embeddings().weight, initial[subset.global_ids])
    assert compact.get_output_embeddings().weight.data_ptr() == compact.get_input_embeddings().weight.data_ptr()
    with torch.no_grad():
        compact.get_input_embeddings().weight.add_(1.0)  # pretend training changed the used rows
    full = dt.expand_vocabulary(compact, subset, initial, config, settings)
    assert full.config.vocab_size == VOCAB
    assert (full.config.bos_token_id, full.config.eos_token_id, full.config.pad_token_id) == (1, 2, 2)
    weights = full.get_input_embeddings().weight
    assert torch.allclose(weights[subset.global_ids], initial[subset.global_ids] + 1.0)
    unused = torch.tensor([0, 1, 3, 39])
    assert torch.allclose(weights[unused], initial[unused] * settings.unused_token_scale)
    assert full.get_output_embeddings().weight.data_ptr() == weights.data_ptr()
    assert torch.equal(full.model.layers[0].mlp.up_proj.weight, compact.model.layers[0].mlp.up_proj.weight)


# --------------------------------------------------------------------------- batches and training


def test_batch_scores_only_main_written_tokens_with_aligned_teacher() -> None:
    data = pattern_data(4, with_teacher=True)
    subset = dt.data_vocabulary(data, VOCAB)
    batch = dt.make_batch(data, [0, 1], subset, data.offsets)
    for row, index in enumerate([0, 1]):
        tokens = data.samples[index].token_ids
        columns = batch.loss_columns[batch.loss_rows == row]
        assert columns[0] == data.samples[index].loss_start - 1 and columns[-1] == len(tokens) - 2
        assert batch.target_token_ids[batch.loss_rows == row].tolist() == tokens[data.samples[index].loss_start:]
    assert torch.equal(subset.to_global(batch.targets), batch.target_token_ids)
    # the teacher's first choice was written as "the next token" at every position
    assert torch.equal(batch.teacher_ids[:, 0], batch.targets)
    answers = dt.make_batch(data, [0], subset, data.offsets, answers_only=True)
    assert answers.target_token_ids.tolist() == data.samples[0].token_ids[data.samples[0].answer_start:]


def test_a_few_training_steps_decrease_the_loss_and_raise_agreement() -> None:
    data = pattern_data(16, with_teacher=True)
    settings = tiny_settings(hidden_size=16, teacher_top_k=2, distill_weight=0.5, epochs=40.0)
    subset = dt.data_vocabulary(data, VOCAB)
    initial = dt.projected_embeddings(torch.randn(VOCAB, 16) * 0.1, settings.hidden_size)
    draft = dt.build_draft(tiny_main_config(), initial, settings, subset)
    before = dt.greedy_agreement(draft, data, range(len(data.samples)), subset)
    history = dt.train_draft(draft, data, subset, settings, held_out=[0, 1], show_progress=False)
    first, last = np.mean(history.loss[:5]), np.mean(history.loss[-5:])
    assert last < 0.5 * first
    assert history.eval_agreement[-1] > max(before, 0.5)
    assert history.stopped_by == "epochs" and history.tokens_seen > 0


def test_split_keeps_all_answers_to_a_prompt_together() -> None:
    data = pattern_data(20)
    train, held_out = dt.split_by_prompt(data, 0.2, seed=0)
    assert sorted(train + held_out) == list(range(20)) and held_out
    held_prompts = {data.samples[i].user_text for i in held_out}
    assert not held_prompts & {data.samples[i].user_text for i in train}


def test_verdicts_say_what_a_speedup_means_and_flag_noise() -> None:
    theory = [{"K": 1, "measured": 1.12, "a_K": 0.03, "with_verification_cost": 0.85},
              {"K": 2, "measured": 0.95, "a_K": 0.25, "with_verification_cost": 0.97},
              {"K": 3, "measured": 1.01, "a_K": 0.25, "with_verification_cost": 1.0}]
    first, second, third = dt.speedup_verdicts(theory)
    assert "faster" in first and "noise" in first and "0.85x" in first
    assert "slower" in second and "noise" not in second
    assert "no measurable difference" in third and "noise" not in third


# --------------------------------------------------------------------------- trimming the output layer


def test_trimmed_output_layer_keeps_the_used_logits_and_silences_the_rest(tmp_path: Path) -> None:
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as opset

    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((VOCAB, 8)).astype(np.float16)
    hidden = opset.parameter([-1, -1, 8], ov.Type.f32, name="hidden")
    logits = opset.matmul(hidden, opset.convert(opset.constant(embeddings), ov.Type.f32), False, True)
    logits.output(0).get_tensor().set_names({"logits"})
    model = ov.Model([opset.result(logits)], [hidden], "tiny")
    source = tmp_path / "exported"
    source.mkdir()
    ov.save_model(model, source / "openvino_model.xml", compress_to_fp16=False)
    (source / "config.json").write_text("{}")
    keep = [2, 9, 17, 33]
    trimmed = dt.trim_output_layer(source, tmp_path / "trimmed", keep, {"test": 1})
    assert (trimmed / "config.json").exists() and read_marker(trimmed)["recipe"] == {"test": 1}
    compiled = ov.Core().compile_model(trimmed / "openvino_model.xml", "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    inputs = rng.standard_normal((1, 3, 8)).astype(np.float32)
    output = compiled(inputs)[compiled.output("logits")]
    expected = inputs @ embeddings.astype(np.float32).T
    assert output.shape == (1, 3, VOCAB)
    np.testing.assert_allclose(output[..., keep], expected[..., keep], rtol=1e-4, atol=1e-4)
    others = [token for token in range(VOCAB) if token not in keep]
    assert np.all(output[..., others] == -1e4)
    assert set(output.argmax(-1).ravel()) <= set(keep)


# --------------------------------------------------------------------------- reuse, not retrain


def test_a_finished_draft_is_reused_and_retrained_only_when_settings_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    main_hf = tmp_path / dt.MAIN_HF_FOLDER
    with atomic_folder(main_hf, {"main": 1}) as work:
        transformers.LlamaForCausalLM(tiny_main_config()).save_pretrained(work)
        (work / "tokenizer.json").write_text("{}")
    settings = tiny_settings(epochs=2.0)
    with atomic_folder(dt.draft_folders(settings).data, {"data": 1}) as work:
        data = pattern_data(8)
        dt.save_samples(data.samples, work / dt.SAMPLES_FILE)
        (work / dt.STATS_FILE).write_text(json.dumps(data.stats))

    calls = []
    real_train = dt.train_full_draft

    def counting_train(*args, **kwargs):
        calls.append(1)
        return real_train(*args, **kwargs)

    monkeypatch.setattr(dt, "train_full_draft", counting_train)
    folder = dt.prepare_trained_draft(settings, show_progress=False)
    assert len(calls) == 1 and (folder / "model.safetensors").exists() and (folder / "tokenizer.json").exists()
    assert json.loads((folder / dt.VOCABULARY_FILE).read_text()) == dt.data_vocabulary(data, VOCAB).global_ids.tolist()
    assert dt.load_history(folder).steps
    recipe = read_marker(folder)["recipe"]
    assert recipe["settings"] == settings.draft_settings() and "torch" in recipe["versions"]

    assert dt.prepare_trained_draft(settings, show_progress=False) == folder
    assert len(calls) == 1  # reused, not retrained
    dt.prepare_trained_draft(tiny_settings(epochs=3.0), show_progress=False)
    assert len(calls) == 2  # a different recipe trains again


def test_missing_inputs_raise_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MODELS_DIR", str(tmp_path))
    with pytest.raises(dt.DraftTrainingError, match="missing or incomplete"):
        dt.prepare_training_data(tiny_settings())
    with pytest.raises(dt.DraftTrainingError, match="missing or incomplete"):
        dt.prepare_exported_draft(tiny_settings())


# --------------------------------------------------------------------------- on the real offline pair


def test_trimmed_draft_runs_in_openvino_genai_and_keeps_the_output(offline_pair, tmp_path: Path) -> None:
    """The main model with its output layer trimmed is a valid draft: GenAI loads it, output stays identical."""
    from utils.pipelines import load_pipeline
    from utils.generation import DecodingSettings, run_prompt

    prompt = "Write a Python function that adds two numbers."
    plain = load_pipeline("plain", offline_pair.main, precision="f32")
    reference = run_prompt(plain, prompt, DecodingSettings("plain", max_new_tokens=24))
    keep = sorted(set(range(2000)) | set(reference.token_ids))  # the answer's tokens and the 2,000 commonest ids
    trimmed = dt.trim_output_layer(offline_pair.main, tmp_path / "trimmed-main", keep, {"test": 1})
    rows, records = dt.measure_speculation(offline_pair.main, trimmed, [prompt], [2], max_new_tokens=24, repeats=1)
    speculative = next(record for record in records if record.mode == "speculative")
    assert speculative.token_ids == reference.token_ids
    assert rows[0]["identical_prompts"] == rows[0]["prompts"] == 1
    # a draft that is the main model itself on these tokens is nearly always right
    assert rows[0]["per_token_acceptance"] > 0.8


def test_step_times_of_several_drafts_are_measured_together(offline_pair) -> None:
    main_steps, draft_steps = dt.measure_draft_step_times(
        offline_pair.main, {"int4": offline_pair.draft, "int8": offline_pair.int8}, token_counts=[2], repeats=2,
        context_tokens=16)
    assert [step.tokens for step in main_steps] == [1, 2]
    assert list(draft_steps) == ["int4", "int8"]
    assert all(len(step.samples_ms) == 2 and step.median_ms > 0 for step in [*main_steps, *draft_steps.values()])
    assert draft_steps["int4"].model == offline_pair.draft.name


def test_trimming_refuses_a_graph_it_does_not_understand(offline_pair, tmp_path: Path) -> None:
    with pytest.raises(dt.DraftTrainingError, match="constant"):
        dt.trim_output_layer(offline_pair.draft, tmp_path / "trimmed-int4", [1, 2, 3], {"test": 1})


def test_main_folders_refuse_a_pair_other_than_offline() -> None:
    with pytest.raises(dt.DraftTrainingError, match="offline pair's main model only"):
        dt.main_folders("phi-3")


def test_benchmark_prompts_in_data_finds_a_leaked_prompt() -> None:
    from types import SimpleNamespace

    from utils.prompts import PROMPTS

    leaked, held_out = PROMPTS[0], PROMPTS[1]
    data = SimpleNamespace(samples=[SimpleNamespace(user_text="  ".join(leaked.text.split(" "))),
                                    SimpleNamespace(user_text="Write a haiku about rain.")])
    assert dt.benchmark_prompts_in_data(data, [leaked, held_out]) == [leaked.id]
