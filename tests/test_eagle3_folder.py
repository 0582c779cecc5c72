"""An EAGLE-3 head's folder (SpecForge layout), its optimum-cli export and OpenVINO GenAI running it.

First a tiny head's folder round trip (no model is loaded). Then the whole path of notebook 08 in small, on the
offline main: its own greedy answer to one prompt, the tapped states of that answer, a head trained on them
(`eagle3_train.train_head`), its folder, `eagle3_folder.export_head`, and `openvino_genai.draft_model` + `LLMPipeline`.
A head that learnt the answer must have its drafts accepted on that prompt (an untrained head has none accepted) and
the output must stay plain greedy's. That only happens if every stage agrees with GenAI: the tapped layers, the order
of the head's inputs, the weight names optimum-intel reads, d2t, the embedding GenAI copies in.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch
from draft_standins import head_weight_names

from utils.training.eagle3_checks import check_head_folder, check_head_matches_main
from utils.training.eagle3_folder import (
    RECIPE_FILE,
    TRAINING_FILE,
    WEIGHTS_FILE,
    load_head_folder,
    save_head_folder,
)
from utils.training.eagle3_head import Eagle3Head, shape_from_main_config
from utils.training.eagle3_vocab import draft_vocabulary
from utils.training.scaffold import TrainingError

TINY_MAIN = {"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 64, "rms_norm_eps": 1e-5,
             "vocab_size": 50, "num_hidden_layers": 12, "max_position_embeddings": 256,
             "rope_parameters": {"rope_theta": 5000.0, "rope_type": "default"}, "bos_token_id": 1,
             "eos_token_id": 2, "pad_token_id": 2}
TINY_TOKENIZER = {"model": {"vocab": {"a": 0, "b": 1}, "merges": []}, "added_tokens": [{"id": 2, "content": "</s>"}]}


def tiny_main_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_MAIN), encoding="utf-8")
    (folder / "tokenizer.json").write_text(json.dumps(TINY_TOKENIZER), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}), encoding="utf-8")
    return folder


def tiny_head() -> Eagle3Head:
    torch.manual_seed(0)
    head = Eagle3Head(shape_from_main_config(TINY_MAIN, 16, 48))
    vocab = draft_vocabulary(np.arange(20, 36), 16, TINY_MAIN["vocab_size"])
    with torch.no_grad():
        for parameter in head.parameters():  # not the initial values: every tensor must round-trip
            parameter.add_(0.05 * torch.randn_like(parameter))
        head.d2t.copy_(torch.from_numpy(vocab.d2t()))
        head.t2d.copy_(torch.from_numpy(vocab.t2d()))
    return head


@pytest.mark.parametrize("include_embedding", [False, True])
def test_a_head_folder_loads_back_as_the_same_head(tmp_path: Path, include_embedding: bool) -> None:
    from safetensors import safe_open

    main_dir = tiny_main_folder(tmp_path / "tiny-main-hf")
    head = tiny_head().eval()
    recipe = {"stage": "test"}
    folder = save_head_folder(head, main_dir, tmp_path / "head-hf", recipe, training={"losses": [3.0, 1.0]},
                              include_embedding=include_embedding)
    assert (folder / ".complete").is_file()
    assert json.loads((folder / RECIPE_FILE).read_text(encoding="utf-8")) == recipe
    assert json.loads((folder / TRAINING_FILE).read_text(encoding="utf-8")) == {"losses": [3.0, 1.0]}
    assert (folder / "tokenizer.json").read_bytes() == (main_dir / "tokenizer.json").read_bytes()
    check_head_matches_main(folder, main_dir)
    config = check_head_folder(folder)
    assert config["rope_theta"] == 5000.0 and config["max_position_embeddings"] == 256
    with safe_open(str(folder / WEIGHTS_FILE), framework="pt") as weights:
        assert set(weights.keys()) == set(head_weight_names(include_embedding))
        assert weights.get_tensor("d2t").dtype == torch.int64 and weights.get_tensor("t2d").dtype == torch.bool

    loaded = load_head_folder(folder).eval()
    assert loaded.shape == head.shape
    if not include_embedding:  # the folder leaves the main's embedding out; GenAI copies it in (so does the caller)
        assert not torch.equal(loaded.embed_tokens.weight, head.embed_tokens.weight)
        with torch.no_grad():
            loaded.embed_tokens.weight.copy_(head.embed_tokens.weight)
    for name, tensor in head.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    fused = torch.randn(2, 5, 3 * TINY_MAIN["hidden_size"])
    tokens = torch.randint(0, TINY_MAIN["vocab_size"], (2, 7))
    with torch.no_grad():
        for before, after in zip(head.unrolled_logits(fused, tokens, 3), loaded.unrolled_logits(fused, tokens, 3),
                                 strict=True):
            assert torch.equal(before, after)


def test_a_head_folder_needs_the_mains_tokenizer_files(tmp_path: Path) -> None:
    main_dir = tiny_main_folder(tmp_path / "tiny-main-hf")
    (main_dir / "tokenizer_config.json").unlink()
    with pytest.raises(TrainingError, match="tokenizer_config.json"):
        save_head_folder(tiny_head(), main_dir, tmp_path / "head-hf", {"stage": "test"})
    assert not (tmp_path / "head-hf").exists(), "a failed write leaves no folder behind"


# --------------------------------------------------------------------------- the whole path on the offline main

PROMPT = "Write a Python function that returns the first n Fibonacci numbers as a list."
MAX_NEW_TOKENS = 40
K = 2  # num_assistant_tokens: the head is trained with as many unroll steps


class TrainedHead(NamedTuple):
    prompt_ids: list[int]  # the chat-templated prompt, as LLMPipeline.generate builds it
    answer_ids: list[int]  # the exact main's greedy answer
    losses: list[float]
    teacher_forced: dict  # eagle3_train.evaluate_accuracy on the answer
    d2t: list[int]
    folder: Path  # the SpecForge-layout folder
    exported: Path  # its OpenVINO export


@pytest.fixture(scope="module")
def trained_head(offline_pair, tmp_path_factory: pytest.TempPathFactory) -> TrainedHead:
    import openvino_genai

    from utils.decoding.pipelines import main_model_properties, make_scheduler_config
    from utils.training.eagle3_checks import check_main
    from utils.training.eagle3_folder import export_head
    from utils.training.eagle3_head import load_main_embedding
    from utils.training.eagle3_hidden import tap_hidden_states
    from utils.training.eagle3_settings import Eagle3Settings
    from utils.training.eagle3_train import evaluate_accuracy, init_from_main, train_head
    from utils.training.scaffold import text_token_ids

    plain = openvino_genai.LLMPipeline(str(offline_pair.main), "CPU", scheduler_config=make_scheduler_config(),
                                       **main_model_properties("f32"))
    tokenizer = plain.get_tokenizer()
    templated = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True)
    prompt_ids = text_token_ids(tokenizer, templated)
    answer = plain.generate(tokenizer.encode(templated, add_special_tokens=False),
                            openvino_genai.GenerationConfig(max_new_tokens=MAX_NEW_TOKENS))
    answer_ids = [int(token) for token in answer.tokens[0]]
    del plain

    data, _ = tap_hidden_states(offline_pair.main, [prompt_ids + answer_ids], show_progress=False)
    data.answer_starts = np.asarray([len(prompt_ids)], dtype=np.int64)
    main_config = check_main(offline_pair.hf)
    settings = Eagle3Settings.preset("quick", draft_vocab_size=128, intermediate_size=128, unroll_steps=K, epochs=60.0,
                            learning_rate=3e-3, warmup_steps=3, validation_share=0.0)
    vocab = draft_vocabulary(data.targets, settings.draft_vocab_size, int(main_config["vocab_size"]),
                             [main_config["eos_token_id"]])
    torch.manual_seed(settings.seed)
    head = Eagle3Head(shape_from_main_config(main_config, settings.draft_vocab_size, settings.intermediate_size))
    init_from_main(head, load_main_embedding(offline_pair.hf), vocab)
    history = train_head(head, data, vocab, settings, show_progress=False)
    teacher_forced = evaluate_accuracy(head, data, [0], settings, vocab.target_to_draft())

    root = tmp_path_factory.mktemp("eagle3-trained")
    folder = save_head_folder(head, offline_pair.hf, root / "smollm2-135m-eagle3-test-hf", {"stage": "test"},
                              {"losses": history.loss})
    exported = export_head(folder, root / "smollm2-135m-eagle3-test-fp16-ov", "fp16")
    return TrainedHead(prompt_ids, answer_ids, history.loss, teacher_forced, vocab.d2t().tolist(), folder, exported)


def test_training_on_the_mains_own_answer_lowers_the_loss(trained_head: TrainedHead, offline_pair) -> None:
    losses = trained_head.losses
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.4f} in {len(losses)} steps; teacher-forced answer chains "
          f"{trained_head.teacher_forced['answer_chain_accuracy']}")
    assert all(np.isfinite(losses)) and losses[-1] < 0.1 * losses[0]
    assert trained_head.teacher_forced["answer_positions"] == len(trained_head.answer_ids)
    assert all(share > 0.9 for share in trained_head.teacher_forced["answer_chain_accuracy"])


def test_the_export_is_an_eagle3_head_with_the_folders_vocabulary(trained_head: TrainedHead, offline_pair) -> None:
    import openvino as ov

    from utils.training.eagle3_checks import check_exported_head

    check_exported_head(trained_head.exported, offline_pair.main)  # eagle3_mode, tokenizer, width, vocabulary
    model = ov.Core().read_model(str(trained_head.exported / "openvino_model.xml"))
    inputs = {port.get_any_name(): port for port in model.inputs}
    assert {"input_ids", "hidden_states", "attention_mask", "position_ids", "beam_idx"} <= set(inputs)
    outputs = {name: port for port in model.outputs for name in port.get_names()}
    assert outputs["logits"].get_partial_shape()[2].get_length() == len(trained_head.d2t)
    # run it once: the fused input (3 x hidden) goes through fc; d2t comes out as the folder stored it
    hidden = json.loads((offline_pair.hf / "config.json").read_text(encoding="utf-8"))["hidden_size"]
    request = ov.Core().compile_model(model, "CPU").create_infer_request()
    length = 4
    request.infer({"input_ids": np.asarray([trained_head.prompt_ids[:length]], dtype=np.int64),
                   "hidden_states": np.zeros((1, length, 3 * hidden), dtype=np.float32),
                   "attention_mask": np.ones((1, length), dtype=np.int64),
                   "position_ids": np.arange(length, dtype=np.int64)[None],
                   "beam_idx": np.zeros(1, dtype=np.int32)})
    assert request.get_tensor("d2t").data.tolist() == trained_head.d2t
    assert request.get_tensor("logits").data.shape == (1, length, len(trained_head.d2t))


def test_genai_drafts_with_the_trained_head_and_stays_lossless(trained_head: TrainedHead, offline_pair) -> None:
    import openvino as ov
    import openvino_genai

    from utils.decoding.decoding_metrics import tokens_per_main_pass
    from utils.decoding.pipelines import main_model_properties, make_scheduler_config

    draft = openvino_genai.draft_model(str(trained_head.exported), "CPU", INFERENCE_PRECISION_HINT="f32")
    pipeline = openvino_genai.LLMPipeline(str(offline_pair.main), "CPU", scheduler_config=make_scheduler_config(),
                                          draft_model=draft, **main_model_properties("f32"))
    prompt = ov.Tensor(np.asarray([trained_head.prompt_ids], dtype=np.int64))
    result = pipeline.generate(prompt, openvino_genai.GenerationConfig(max_new_tokens=MAX_NEW_TOKENS,
                                                                       num_assistant_tokens=K))
    assert [int(token) for token in result.tokens[0]] == trained_head.answer_ids, "the exact main stays lossless"
    metrics = result.extended_perf_metrics
    steps = [int(n) for n in metrics.main_model_metrics.raw_metrics.m_batch_sizes]
    per_pass = tokens_per_main_pass(steps)
    print(f"drafted {metrics.get_num_draft_tokens()}, accepted {metrics.get_num_accepted_tokens()}, tokens per main "
          f"pass {per_pass} (K = {K}), steps {steps}")
    assert sum(steps) == len(trained_head.answer_ids)
    # an untrained head has none accepted (1 token per pass); this one learnt the answer: most of its drafts pass
    assert per_pass is not None and per_pass >= 1 + K / 2
