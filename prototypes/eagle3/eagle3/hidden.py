"""Stage 2: what the head reads - the main's hidden states at three tapped layers, and its greedy next token.

OpenVINO GenAI taps the main's decoder layers {2, N/2, N-3} (N layers; at
least 10): the output of each layer's MLP residual add, which is Hugging
Face's `hidden_states[i + 1]` (index 0 is the embedding output). The three
are concatenated (3 x hidden) and `fc` fuses them. Here a teacher-forced
transformers pass of the main over every sample gives them all at once,
batched, in float32 (the precision of the exact main that the head will
serve); they are stored as float16 to halve the memory.

The training target at each position is the main's own greedy choice there
(argmax of its logits), not the data token: what the exact main would accept.
"""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eagle3.settings import Eagle3Error

HIDDEN_FILE = "hidden.npy"
TOKENS_FILE = "tokens.npy"
TARGETS_FILE = "targets.npy"
OFFSETS_FILE = "offsets.npy"
ANSWERS_FILE = "answer_starts.npy"
STATS_FILE = "hidden_stats.json"
MIN_MAIN_LAYERS = 10


def tapped_layers(num_hidden_layers: int) -> tuple[int, int, int]:
    """The decoder layers GenAI taps for EAGLE-3: (2, N // 2, N - 3); a main needs at least 10 layers."""
    if isinstance(num_hidden_layers, bool) or not isinstance(num_hidden_layers, int):
        raise Eagle3Error(f"num_hidden_layers must be an integer, got {num_hidden_layers!r}.")
    if num_hidden_layers < MIN_MAIN_LAYERS:
        raise Eagle3Error(f"The main has {num_hidden_layers} decoder layers; OpenVINO GenAI taps layers "
                          f"(2, N/2, N-3) and needs at least {MIN_MAIN_LAYERS}. Use a deeper main model.")
    return 2, num_hidden_layers // 2, num_hidden_layers - 3


def hidden_state_indices(num_hidden_layers: int) -> tuple[int, int, int]:
    """Indices into Hugging Face's `output_hidden_states` tuple for the tapped layers (layer i -> i + 1)."""
    return tuple(layer + 1 for layer in tapped_layers(num_hidden_layers))  # type: ignore[return-value]


@dataclass
class TappedData:
    """Every sample's positions concatenated: tokens, fused-input features, main's greedy next token."""

    tokens: Any  # int32 [positions]
    hidden: Any  # float16 [positions, 3 * target_hidden]
    targets: Any  # int32 [positions]: main's argmax at each position (predicts the next token)
    offsets: Any  # int64 [samples + 1]: sample i spans offsets[i]:offsets[i + 1]
    answer_starts: Any = None  # int64 [samples]: first answer position of each sample (None: unknown)

    @property
    def samples(self) -> int:
        return len(self.offsets) - 1


def length_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Sample indices grouped by similar length so that a padded batch holds at most `batch_tokens`."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        longest = max([lengths[i] for i in current] + [lengths[index]])
        if current and longest * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def tap_hidden_states(main_hf_dir: Path, sequences: Sequence[Sequence[int]], batch_tokens: int = 4096,
                      threads: int | None = None) -> tuple[TappedData, dict]:
    """Run the main (transformers, float32) over `sequences`; return the tapped states and the main's targets."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    if threads:
        torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(str(main_hf_dir), dtype=torch.float32)
    model.eval()
    indices = hidden_state_indices(int(model.config.num_hidden_layers))
    width = 3 * int(model.config.hidden_size)
    lengths = [len(s) for s in sequences]
    offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(lengths)
    total = int(offsets[-1])
    hidden = np.zeros((total, width), dtype=np.float16)
    targets = np.zeros(total, dtype=np.int32)
    tokens = np.zeros(total, dtype=np.int32)
    started = time.perf_counter()
    with torch.inference_mode():
        for batch in length_batches(lengths, batch_tokens):
            longest = max(lengths[i] for i in batch)
            ids = torch.zeros((len(batch), longest), dtype=torch.long)
            mask = torch.zeros((len(batch), longest), dtype=torch.long)
            for row, index in enumerate(batch):
                ids[row, :lengths[index]] = torch.tensor(sequences[index])
                mask[row, :lengths[index]] = 1
            out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            fused = torch.cat([out.hidden_states[i] for i in indices], dim=-1)
            argmax = out.logits.argmax(dim=-1)
            for row, index in enumerate(batch):
                start, size = int(offsets[index]), lengths[index]
                hidden[start:start + size] = fused[row, :size].to(torch.float16).numpy()
                targets[start:start + size] = argmax[row, :size].numpy()
                tokens[start:start + size] = ids[row, :size].numpy()
    seconds = time.perf_counter() - started
    stats = {"backend": "transformers", "positions": total, "samples": len(sequences), "seconds": seconds,
             "tokens_per_second": total / max(seconds, 1e-9), "tapped_layers": list(indices),
             "hf_hidden_state_indices": [i for i in indices], "width": width}
    stats["tapped_layers"] = [i - 1 for i in indices]
    return TappedData(tokens, hidden, targets, offsets), stats


EXACT_F32 = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0", "KV_CACHE_PRECISION": "f32"}


def _is_mlp_residual_add(node: Any) -> bool:
    """An Add whose second input is a MatMul fed by a Multiply: the MLP's residual add (down_proj(gate * up))."""
    if node.get_type_name() != "Add":
        return False
    matmul = node.input_value(1).get_node()
    return matmul.get_type_name() == "MatMul" and matmul.input_value(0).get_node().get_type_name() == "Multiply"


def tapped_model(main_ov_dir: Path, num_hidden_layers: int) -> Any:
    """The main's OpenVINO model with the three tapped layers' outputs added, found as GenAI finds them."""
    import openvino as ov

    model = ov.Core().read_model(str(Path(main_ov_dir) / "openvino_model.xml"))
    layers = tapped_layers(num_hidden_layers)
    found: dict[int, Any] = {}
    for node in model.get_ordered_ops():
        if not _is_mlp_residual_add(node):
            continue
        for layer in layers:
            if f"layers.{layer}/" in node.get_friendly_name():
                found[layer] = node.output(0)
    if len(found) != 3:
        raise Eagle3Error(f"Found the MLP residual add of layers {sorted(found)} in {main_ov_dir}, expected "
                          f"{list(layers)}: not a Llama-like OpenVINO export.")
    model.add_outputs([found[layer] for layer in layers])
    return model


def tap_hidden_states_openvino(main_ov_dir: Path, sequences: Sequence[Sequence[int]], batch_tokens: int = 2048,
                               device: str = "CPU", max_seconds: float | None = None, seed: int = 0
                               ) -> tuple[TappedData, list[int], dict]:
    """The same as `tap_hidden_states`, from a prefill of the main's OpenVINO model under the exact f32 main.

    It is the very model (fp16 weights, f32 compute) that the head will serve, and faster than
    transformers here. Batches run in a seeded random order; with `max_seconds` the pass stops after
    the batch that crosses it, and only the samples done are returned (their indices, ascending).
    """
    import random

    import numpy as np
    import openvino as ov

    config = json.loads((Path(main_ov_dir) / "config.json").read_text(encoding="utf-8"))
    layers = int(config["num_hidden_layers"])
    model = tapped_model(Path(main_ov_dir), layers)
    compiled = ov.Core().compile_model(model, device, EXACT_F32)
    request = compiled.create_infer_request()
    tap_outputs = compiled.outputs[-3:]
    lengths = [len(s) for s in sequences]
    batches = length_batches(lengths, batch_tokens)
    random.Random(seed).shuffle(batches)
    per_sample: dict[int, tuple[Any, Any]] = {}
    started = time.perf_counter()
    for batch in batches:
        if max_seconds is not None and per_sample and time.perf_counter() - started > max_seconds:
            break
        longest = max(lengths[i] for i in batch)
        ids = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros((len(batch), longest), dtype=np.int64)
        for row, index in enumerate(batch):
            ids[row, :lengths[index]] = sequences[index]
            mask[row, :lengths[index]] = 1
        positions = np.broadcast_to(np.arange(longest, dtype=np.int64), ids.shape).copy()
        request.reset_state()
        request.infer({"input_ids": ids, "attention_mask": mask, "position_ids": positions,
                       "beam_idx": np.arange(len(batch), dtype=np.int32)})
        argmax = request.get_tensor("logits").data.argmax(axis=-1)
        fused = np.concatenate([request.get_tensor(output).data for output in tap_outputs], axis=-1)
        for row, index in enumerate(batch):
            size = lengths[index]
            per_sample[index] = (fused[row, :size].astype(np.float16), argmax[row, :size].astype(np.int32))
    seconds = time.perf_counter() - started
    done = sorted(per_sample)
    done_lengths = [lengths[i] for i in done]
    offsets = np.zeros(len(done) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(done_lengths)
    hidden = np.concatenate([per_sample[i][0] for i in done]) if done else np.zeros((0, 3 * int(config["hidden_size"])),
                                                                                     dtype=np.float16)
    targets = np.concatenate([per_sample[i][1] for i in done]) if done else np.zeros(0, dtype=np.int32)
    tokens = np.concatenate([np.asarray(sequences[i], dtype=np.int32) for i in done]) if done else np.zeros(
        0, dtype=np.int32)
    stats = {"backend": "openvino", "positions": int(offsets[-1]), "samples": len(done),
             "samples_offered": len(sequences), "seconds": seconds,
             "tokens_per_second": int(offsets[-1]) / max(seconds, 1e-9), "tapped_layers": list(tapped_layers(layers)),
             "width": hidden.shape[1], "max_seconds": max_seconds}
    return TappedData(tokens, hidden, targets, offsets), done, stats


def save_tapped(data: TappedData, folder: Path, stats: dict) -> None:
    import numpy as np

    np.save(folder / HIDDEN_FILE, data.hidden)
    np.save(folder / TOKENS_FILE, data.tokens)
    np.save(folder / TARGETS_FILE, data.targets)
    np.save(folder / OFFSETS_FILE, data.offsets)
    if data.answer_starts is not None:
        np.save(folder / ANSWERS_FILE, data.answer_starts)
    (folder / STATS_FILE).write_text(json.dumps(stats, indent=2), encoding="utf-8")


def load_tapped(folder: Path, mmap: bool = True) -> TappedData:
    import numpy as np

    folder = Path(folder)
    mode = "r" if mmap else None
    answers = np.load(folder / ANSWERS_FILE) if (folder / ANSWERS_FILE).exists() else None
    return TappedData(np.load(folder / TOKENS_FILE), np.load(folder / HIDDEN_FILE, mmap_mode=mode),
                      np.load(folder / TARGETS_FILE), np.load(folder / OFFSETS_FILE), answers)


def write_tapped_states(main_dir: Path, data_dir: Path, folder: Path, sequence_length: int,
                        batch_tokens: int = 2048, backend: str = "openvino", max_minutes: float | None = None,
                        force: bool = False) -> Path:
    """Build (or reuse) `folder`: the tapped states of every sample of `data_dir`, cut to `sequence_length`.

    `backend` "openvino" (`main_dir` = the main's OpenVINO folder, the default: faster, and the model
    that is served) or "transformers" (`main_dir` = its Hugging Face folder).
    """
    if backend not in ("openvino", "transformers"):
        raise Eagle3Error(f"backend must be 'openvino' or 'transformers', got {backend!r}.")
    from eagle3.data import load_samples
    from eagle3.atomic import atomic_folder, is_up_to_date, read_recipe

    recipe = {"stage": "eagle3-hidden", "main": Path(main_dir).name, "backend": backend,
              "sequence_length": sequence_length, "max_minutes": max_minutes,
              "data": read_recipe(data_dir)}
    if not force and is_up_to_date(folder, recipe):
        return folder
    import numpy as np

    samples = load_samples(data_dir)
    sequences = [s.token_ids[:sequence_length] for s in samples]
    if backend == "openvino":
        data, done, stats = tap_hidden_states_openvino(Path(main_dir), sequences, batch_tokens,
                                                       max_seconds=None if max_minutes is None else max_minutes * 60)
    else:
        data, stats = tap_hidden_states(Path(main_dir), sequences, batch_tokens)
        done = list(range(len(samples)))
    data.answer_starts = np.asarray([min(samples[i].answer_start, sequence_length) for i in done], dtype=np.int64)
    with atomic_folder(folder, recipe) as work:
        save_tapped(data, work, stats)
    return folder
