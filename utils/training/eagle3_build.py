"""An EAGLE-3 head from start to finish (`prepare_eagle3_head`), and checks of how GenAI runs it.

`tree_mode_differences` shows tree mode's KV-cache trap; `answer_chain_accuracy` scores a head on the main's answers.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.models.atomic_folder import is_up_to_date, read_marker
from utils.training.eagle3_settings import Eagle3Folders, Eagle3Settings, eagle3_folders, head_recipe
from utils.training.scaffold import MainModel, require_complete


@dataclass
class Eagle3Build:
    """What `prepare_eagle3_head` made: the folders, and what the stages measured."""

    folders: Eagle3Folders
    data: dict  # the data folder's generation statistics
    hidden: dict  # the tapped states' statistics
    training: dict  # the head's training record (`eagle3_folder.TRAINING_FILE`)
    rebuilt: list[str] = field(default_factory=list)  # the stages that ran (the others were reused)


def random_head_folder(main_hf_dir: Path, folder: Path, draft_vocab_size: int, intermediate_size: int | None = None,
                       seed: int = 0) -> Path:
    """An untrained (lossless, useless) head for the main, built atomically: the folder format, export and step cost."""
    import numpy as np
    import torch

    from utils.training.eagle3_checks import check_main
    from utils.training.eagle3_folder import save_head_folder
    from utils.training.eagle3_head import Eagle3Head, shape_from_main_config
    from utils.training.eagle3_vocab import draft_vocabulary

    main_config = check_main(Path(main_hf_dir))
    recipe = {"stage": "eagle3-random-head", "main": Path(main_hf_dir).name, "draft_vocab_size": draft_vocab_size,
              "intermediate_size": intermediate_size, "seed": seed,
              "main_hf_recipe": (read_marker(Path(main_hf_dir)) or {}).get("recipe")}
    if is_up_to_date(Path(folder), recipe):
        return Path(folder)
    torch.manual_seed(seed)
    head = Eagle3Head(shape_from_main_config(main_config, draft_vocab_size, intermediate_size))
    vocab = draft_vocabulary(np.zeros(0, dtype=np.int64), draft_vocab_size, int(main_config["vocab_size"]))
    with torch.no_grad():
        head.d2t.copy_(torch.from_numpy(vocab.d2t()))
        head.t2d.copy_(torch.from_numpy(vocab.t2d()))
    return save_head_folder(head, Path(main_hf_dir), Path(folder), recipe)


def prepare_eagle3_head(settings: Eagle3Settings, main: MainModel, device: str = "CPU", force: bool = False,
                        show_progress: bool = True) -> Eagle3Build:
    """Build (or reuse) every stage of a head for `main`: data, tapped states, training, folder, export (checked)."""
    from utils.training.eagle3_checks import check_export_packages, check_exported_head, check_main
    from utils.training.eagle3_folder import TRAINING_FILE, export_head
    from utils.training.eagle3_hidden import TAPPING_STATS_FILE, write_tapped_states
    from utils.training.eagle3_train import train_and_save_head
    from utils.training.scaffold import load_stats, write_samples

    check_main(main.hf)
    check_main(main.openvino)
    require_complete(main.hf, "main model (Hugging Face)")
    check_export_packages()
    folders = eagle3_folders(settings, main)
    rebuilt = []
    before = read_marker(folders.data)
    write_samples(settings, main, folders.data, device, force, show_progress)
    if read_marker(folders.data) != before:
        rebuilt.append("data")
    before = read_marker(folders.hidden)
    write_tapped_states(settings, main, device, force or "data" in rebuilt, show_progress)
    if read_marker(folders.hidden) != before:
        rebuilt.append("tapped states")
    recipe = head_recipe(settings, folders.hidden, main.hf)
    if force or not is_up_to_date(folders.head, recipe):
        train_and_save_head(settings, main, folders, recipe, show_progress)
        rebuilt.append("training")
    before = read_marker(folders.exported)
    export_head(folders.head, folders.exported, settings.weight_format)
    if read_marker(folders.exported) != before:
        rebuilt.append("export")
    check_exported_head(folders.exported, main.openvino)
    return Eagle3Build(folders=folders, data=load_stats(folders.data),
                       hidden=json.loads((folders.hidden / TAPPING_STATS_FILE).read_text(encoding="utf-8")),
                       training=json.loads((folders.head / TRAINING_FILE).read_text(encoding="utf-8")),
                       rebuilt=rebuilt)


def tree_mode_differences(main_dir: Path, head_dir: Path, prompts: Sequence[Any], max_new_tokens: int,
                          branching_factor: int = 2, tree_depth: int = 3, device: str = "CPU") -> list[dict]:
    """Prompts (`id`, `text`) whose output differs from the exact f32 main's plain greedy output, and tokens per main
    pass, for three runs that change one thing at a time: chain mode (K = `tree_depth`) with GenAI's default KV cache,
    tree mode with the default KV cache, tree mode with an f32 KV cache."""
    import openvino_genai

    from utils.decoding.decoding_metrics import tokens_per_main_pass
    from utils.decoding.pipelines import main_model_properties, make_scheduler_config
    from utils.training.eagle3_checks import check_exported_head

    check_exported_head(Path(head_dir), Path(main_dir))
    exact = main_model_properties("f32")
    default_kv = {k: v for k, v in exact.items() if k != "KV_CACHE_PRECISION"}
    plain = openvino_genai.LLMPipeline(str(main_dir), device, scheduler_config=make_scheduler_config(), **exact)
    plain_config = openvino_genai.GenerationConfig(max_new_tokens=max_new_tokens)
    references = {prompt.id: plain.generate(prompt.text, plain_config) for prompt in prompts}
    del plain
    chain_config = openvino_genai.GenerationConfig(max_new_tokens=max_new_tokens, num_assistant_tokens=tree_depth)
    tree_config = openvino_genai.GenerationConfig(max_new_tokens=max_new_tokens, branching_factor=branching_factor,
                                                  tree_depth=tree_depth)
    runs = [("chain", "default", chain_config, default_kv), ("tree", "default", tree_config, default_kv),
            ("tree", "f32", tree_config, exact)]
    rows = []
    for mode, kv_cache, config, properties in runs:
        draft = openvino_genai.draft_model(str(head_dir), device, INFERENCE_PRECISION_HINT="f32")
        pipeline = openvino_genai.LLMPipeline(str(main_dir), device, scheduler_config=make_scheduler_config(),
                                              draft_model=draft, **properties)
        differing, passes = [], []
        for prompt in prompts:
            result = pipeline.generate([prompt.text], config)
            if result.texts[0] != str(references[prompt.id]):
                differing.append(prompt.id)
            steps = [int(n) for n in result.extended_perf_metrics.main_model_metrics.raw_metrics.m_batch_sizes]
            value = tokens_per_main_pass(steps) if steps else None
            if value is not None:
                passes.append(value)
        rows.append({"mode": mode, "KV cache": kv_cache,
                     "outputs differing from plain": f"{len(differing)}/{len(prompts)}", "differing": differing,
                     "tokens per main pass": sum(passes) / len(passes) if passes else None})
        del pipeline, draft
    return rows


def answer_chain_accuracy(head_dir: Path, main: MainModel, answers: Sequence[tuple[str, str, Sequence[int]]],
                          settings: Eagle3Settings, device: str = "CPU") -> list[dict]:
    """Teacher-forced chain accuracy of a head on (group, user message, main's greedy answer ids), a row per group.
    Messages get the chat template as `LLMPipeline.generate` applies it; scored as `eagle3_train.evaluate_accuracy`."""
    import numpy as np
    import openvino_genai
    import torch

    from utils.training.eagle3_folder import load_head_folder
    from utils.training.eagle3_head import load_main_embedding
    from utils.training.eagle3_hidden import tap_hidden_states
    from utils.training.eagle3_train import evaluate_accuracy
    from utils.training.eagle3_vocab import vocabulary_from_d2t
    from utils.training.scaffold import text_token_ids

    require_complete(Path(head_dir), "trained EAGLE-3 head (Hugging Face layout)")
    tokenizer = openvino_genai.Tokenizer(str(main.openvino))
    sequences, answer_starts = [], []
    for _, message, answer in answers:
        templated = tokenizer.apply_chat_template([{"role": "user", "content": message}], add_generation_prompt=True)
        prompt_ids = text_token_ids(tokenizer, templated)
        sequences.append(prompt_ids + [int(token) for token in answer])
        answer_starts.append(len(prompt_ids))
    data, _ = tap_hidden_states(main.openvino, sequences, device=device, show_progress=False)
    data.answer_starts = np.asarray(answer_starts, dtype=np.int64)
    head = load_head_folder(Path(head_dir))
    with torch.no_grad():
        head.embed_tokens.weight.copy_(load_main_embedding(main.hf))
    target_to_draft = vocabulary_from_d2t(head.d2t.numpy(), head.shape.vocab_size).target_to_draft()
    rows = []
    for group in dict.fromkeys(group for group, _, _ in answers):
        members = [index for index, (name, _, _) in enumerate(answers) if name == group]
        scores = evaluate_accuracy(head, data, members, settings, target_to_draft)
        rows.append(chain_accuracy_row(group, scores["answer_positions"], scores["answer_chain_accuracy"]))
    return rows


def chain_accuracy_row(group: str, positions: int, shares: Sequence[float]) -> dict:
    """A row of the shares of positions whose first 1, 2, ... drafts are all right, and the tokens per main pass
    they imply at each K: 1 + the sum of the first K shares (a chain yields its right prefix plus the main's token)."""
    return ({"answers of": group, "answer positions": positions}
            | {f"first {j + 1} right": share for j, share in enumerate(shares)}
            | {f"implied tokens per main pass, K = {k}": 1 + sum(shares[:k]) for k in range(1, len(shares) + 1)})


PUBLISHED_EXPORT_ARGS = ("--task", "text-generation-with-past", "--trust-remote-code")


def export_published_head(head_repo: str, main_repo: str, head_weight_format: str = "fp16",
                          main_weight_format: str = "int4") -> tuple[Path, Path]:
    """Export a hub-published head and its main with optimum-cli (fails fast offline); return (main, head) folders."""
    from utils.models.model_fetch import huggingface_endpoint, require_reachable
    from utils.models.optimum_export import export_recipe, export_with_optimum
    from utils.paths import models_dir
    from utils.training.eagle3_checks import check_export_packages, require_eagle3_mode

    require_reachable(huggingface_endpoint(), "the Hugging Face hub")
    check_export_packages()
    folders = []
    for repo, weight_format, check in ((main_repo, main_weight_format, None),
                                       (head_repo, head_weight_format, require_eagle3_mode)):
        destination = models_dir() / f"{repo.split('/')[-1].lower()}-{weight_format}-ov"
        extra = PUBLISHED_EXPORT_ARGS if check is not None else ()
        recipe = export_recipe(1, {"huggingface_id": repo}, weight_format, extra)
        if not is_up_to_date(destination, recipe):
            export_with_optimum(repo, destination, weight_format, recipe, extra, check=check)
        folders.append(destination)
    return folders[0], folders[1]
