"""Stage 2 of an EAGLE-3 head: the main's hidden states at the layers GenAI taps, and the labels.

GenAI taps the MLP residual adds of decoder layers (2, N/2, N-3), HF's `hidden_states[i + 1]`; here from a prefill
of the exact f32 main with them as extra outputs. Labels: the main's greedy choices (what it accepts), not the text.
"""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.models.atomic_folder import atomic_folder, is_up_to_date
from utils.training.eagle3_checks import MIN_MAIN_LAYERS
from utils.training.eagle3_settings import Eagle3Settings, eagle3_folders, hidden_recipe
from utils.training.scaffold import MainModel, TrainingError, length_batches, padded_prefills, require_complete

HIDDEN_FILE = "hidden.npy"
TOKENS_FILE = "tokens.npy"
TARGETS_FILE = "targets.npy"
OFFSETS_FILE = "offsets.npy"
ANSWERS_FILE = "answer_starts.npy"
TAPPING_STATS_FILE = "hidden_stats.json"


def tapped_layers(num_hidden_layers: int) -> tuple[int, int, int]:
    """The decoder layers GenAI taps for EAGLE-3: (2, N // 2, N - 3); a main needs at least 10 layers."""
    if isinstance(num_hidden_layers, bool) or not isinstance(num_hidden_layers, int):
        raise TrainingError(f"num_hidden_layers must be an integer, got {num_hidden_layers!r}.")
    if num_hidden_layers < MIN_MAIN_LAYERS:
        raise TrainingError(f"The main has {num_hidden_layers} decoder layers; OpenVINO GenAI taps layers "
                            f"(2, N/2, N-3) and needs at least {MIN_MAIN_LAYERS}. Use a deeper main model.")
    return 2, num_hidden_layers // 2, num_hidden_layers - 3


def hidden_state_indices(num_hidden_layers: int) -> tuple[int, int, int]:
    """Indices into Hugging Face's `output_hidden_states` tuple of the tapped layers (layer i -> i + 1)."""
    first, middle, last = tapped_layers(num_hidden_layers)
    return first + 1, middle + 1, last + 1


@dataclass
class TappedData:
    """Every sample's positions, concatenated: tokens, the fused head input, the main's greedy next token."""

    tokens: Any  # int32 [positions]
    hidden: Any  # float16 [positions, 3 * hidden]
    targets: Any  # int32 [positions]: the main's argmax at each position (it predicts the next token)
    offsets: Any  # int64 [samples + 1]: sample i spans offsets[i]:offsets[i + 1]
    answer_starts: Any = None  # int64 [samples]: first answer position of each sample (None: unknown)

    @property
    def samples(self) -> int:
        return len(self.offsets) - 1


def _is_mlp_residual_add(node: Any) -> bool:
    """An Add whose second input is a MatMul fed by a Multiply: the MLP's residual add (down_proj(gate * up))."""
    if node.get_type_name() != "Add":
        return False
    matmul = node.input_value(1).get_node()
    return matmul.get_type_name() == "MatMul" and matmul.input_value(0).get_node().get_type_name() == "Multiply"


def tapped_model(main_ov_dir: Path) -> Any:
    """The main's OpenVINO model (`openvino.Model`) with the three tapped layers' outputs added as its last outputs."""
    import openvino as ov

    config = json.loads((Path(main_ov_dir) / "config.json").read_text(encoding="utf-8"))
    layers = tapped_layers(int(config["num_hidden_layers"]))
    model = ov.Core().read_model(str(Path(main_ov_dir) / "openvino_model.xml"))
    found: dict[int, Any] = {}
    for node in model.get_ordered_ops():
        if _is_mlp_residual_add(node):
            for layer in layers:
                if f"layers.{layer}/" in node.get_friendly_name():
                    found[layer] = node.output(0)
    if len(found) != 3:
        raise TrainingError(f"Found the MLP residual add of layers {sorted(found)} in {main_ov_dir}, expected "
                            f"{list(layers)}: not a Llama-like OpenVINO export.")
    model.add_outputs([found[layer] for layer in layers])
    return model


def tap_hidden_states(main_ov_dir: Path, sequences: Sequence[Sequence[int]], batch_tokens: int = 2048,
                      device: str = "CPU", show_progress: bool = True) -> tuple[TappedData, dict]:
    """Prefill the exact f32 main over `sequences` in padded batches; return the tapped states and the labels."""
    import numpy as np
    import openvino as ov
    from tqdm.auto import tqdm

    from utils.decoding.pipelines import main_model_properties

    # compiled as the exact f32 main: f32 compute, no dynamic quantisation, an f32 KV cache
    compiled = ov.Core().compile_model(tapped_model(Path(main_ov_dir)), device, main_model_properties("f32"))
    request = compiled.create_infer_request()
    tap_outputs = compiled.outputs[-3:]
    lengths = [len(s) for s in sequences]
    per_sample: dict[int, tuple[Any, Any]] = {}
    started = time.perf_counter()
    batches = length_batches(lengths, batch_tokens, shuffle_seed=0)  # long and short mixed: a fair rate
    for batch in tqdm(padded_prefills(request, sequences, batches), desc="tapped states", unit="batch",
                      total=len(batches), disable=not show_progress):
        argmax = request.get_tensor("logits").data.argmax(axis=-1)
        fused = np.concatenate([request.get_tensor(output).data for output in tap_outputs], axis=-1)
        for row, index in enumerate(batch):
            size = lengths[index]
            per_sample[index] = (fused[row, :size].astype(np.float16), argmax[row, :size].astype(np.int32))
    seconds = time.perf_counter() - started
    order = range(len(sequences))
    offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(lengths)
    data = TappedData(tokens=np.concatenate([np.asarray(sequences[i], dtype=np.int32) for i in order]),
                      hidden=np.concatenate([per_sample[i][0] for i in order]),
                      targets=np.concatenate([per_sample[i][1] for i in order]), offsets=offsets)
    stats = {"positions": int(offsets[-1]), "samples": len(sequences), "seconds": seconds,
             "positions_per_second": int(offsets[-1]) / max(seconds, 1e-9), "width": int(data.hidden.shape[1])}
    return data, stats


def save_tapped(data: TappedData, folder: Path, stats: dict) -> None:
    import numpy as np

    folder = Path(folder)
    np.save(folder / HIDDEN_FILE, data.hidden)
    np.save(folder / TOKENS_FILE, data.tokens)
    np.save(folder / TARGETS_FILE, data.targets)
    np.save(folder / OFFSETS_FILE, data.offsets)
    if data.answer_starts is not None:
        np.save(folder / ANSWERS_FILE, data.answer_starts)
    (folder / TAPPING_STATS_FILE).write_text(json.dumps(stats, indent=2), encoding="utf-8")


def load_tapped(folder: Path) -> TappedData:
    """The tapped states of a folder written by `write_tapped_states`."""
    import numpy as np

    folder = Path(folder)
    answers = np.load(folder / ANSWERS_FILE) if (folder / ANSWERS_FILE).exists() else None
    return TappedData(np.load(folder / TOKENS_FILE), np.load(folder / HIDDEN_FILE), np.load(folder / TARGETS_FILE),
                      np.load(folder / OFFSETS_FILE), answers)


def write_tapped_states(settings: Eagle3Settings, main: MainModel, device: str = "CPU", force: bool = False,
                        show_progress: bool = True) -> Path:
    """Build (or reuse) the folder of tapped states of every sample of the data folder, cut to `sequence_length`."""
    import numpy as np

    from utils.training.scaffold import load_samples

    folders = eagle3_folders(settings, main)
    require_complete(folders.data, "EAGLE-3 training data", "build it first with eagle3_build.prepare_eagle3_head")
    recipe = hidden_recipe(settings, main.openvino, folders.data)
    if not force and is_up_to_date(folders.hidden, recipe):
        return folders.hidden
    samples = load_samples(folders.data)
    sequences = [sample.token_ids[:settings.sequence_length] for sample in samples]
    data, stats = tap_hidden_states(main.openvino, sequences, device=device, show_progress=show_progress)
    data.answer_starts = np.asarray([min(s.answer_start, settings.sequence_length) for s in samples], dtype=np.int64)
    with atomic_folder(folders.hidden, recipe) as work:
        save_tapped(data, work, stats)
    return folders.hidden
