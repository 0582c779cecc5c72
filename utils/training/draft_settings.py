"""Notebook 06's draft (FastDraft in miniature, arXiv:2411.11055) on the training scaffold: settings and folders.

Start with `DraftTrainingSettings.preset("quick")`; `draft_folders` says where each stage's result lives.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

from utils.input_checks import as_integer
from utils.paths import models_dir
from utils.training.scaffold import MainModel, TrainingError, TrainingSettings


@dataclass(frozen=True)
class DraftTrainingSettings(TrainingSettings):
    """Everything that decides what draft comes out (and so the folders' recipes).
    `teacher_top_k`: main probabilities kept per position (0: no distillation), weighted by `distill_weight`."""

    DATA_KEYS: ClassVar[tuple[str, ...]] = (*TrainingSettings.DATA_KEYS, "teacher_top_k")
    prompts: int = 80
    sampled_answers: int = 1
    answer_max_tokens: int = 128
    teacher_top_k: int = 16
    hidden_size: int = 256
    layers: int = 4
    attention_heads: int = 4
    key_value_heads: int = 2
    intermediate_size: int = 768
    epochs: float = 12.0
    batch_size: int = 16
    learning_rate: float = 2e-3
    warmup_steps: int = 20
    distill_weight: float = 0.5
    restrict_vocabulary: bool = True
    final_norm_init: float = 1.0
    unused_token_scale: float = 0.25
    draft_weight_format: str = "fp16"

    def __post_init__(self) -> None:
        self.check_shared()
        for name in ("hidden_size", "layers", "attention_heads", "key_value_heads", "intermediate_size", "batch_size"):
            object.__setattr__(self, name, as_integer(getattr(self, name), name, minimum=1, error=TrainingError))
        if self.teacher_top_k < 0 or not 0.0 <= self.distill_weight <= 1.0:
            raise TrainingError("teacher_top_k must be >= 0 and distill_weight lie in [0, 1].")
        if self.distill_weight > 0 and self.teacher_top_k == 0:
            raise TrainingError("distill_weight > 0 needs teacher_top_k > 0 (the main's probabilities to "
                                "distil). Set teacher_top_k, e.g. 16, or distill_weight=0.")
        if self.hidden_size % self.attention_heads or self.attention_heads % self.key_value_heads:
            raise TrainingError(f"hidden_size {self.hidden_size} must be a multiple of attention_heads "
                                f"{self.attention_heads}, and that a multiple of key_value_heads {self.key_value_heads}.")
        if self.draft_weight_format not in ("fp32", "fp16", "int8"):
            raise TrainingError("draft_weight_format must be fp32, fp16 or int8 (a draft this small gains "
                                "nothing from int4).")

    def draft_settings(self) -> dict:
        """The settings that decide the trained weights, given the data (the seed also orders the batches)."""
        skip = set(self.data_settings()) | {"name", "concurrent_sequences", "draft_weight_format"}
        return {key: value for key, value in asdict(self).items() if key not in skip} | {"seed": self.seed}


DraftTrainingSettings.PRESETS = {
    # minutes on 2 cores: little data, many epochs; shows the recipe end to end
    "quick": DraftTrainingSettings(),
    # ~20x the data, ~10x the training tokens
    "full": DraftTrainingSettings(name="full", prompts=1600, epochs=6.0),
    # the test command's run size (SPECDEC_RUN_SIZE=quick): checks the code, not the draft
    "tiny": DraftTrainingSettings(name="tiny", prompts=24, answer_max_tokens=64, epochs=4.0),
}


@dataclass(frozen=True)
class DraftFolders:
    """Where each stage of a draft lives."""

    data: Path  # main-written samples and the main's top-k probabilities
    hf: Path  # the trained draft, Hugging Face format
    openvino: Path  # its `optimum-cli export openvino` export (output layer over the whole vocabulary)
    trimmed: Path  # the export with its output layer trimmed to the tokens the data uses (the draft to use)


def draft_folders(settings: DraftTrainingSettings, main: MainModel, root: Path | None = None) -> DraftFolders:
    """Folders for the data, the trained draft and its OpenVINO exports ("smollm2-135m-selfdraft-quick-hf", ...)."""
    root = models_dir() if root is None else Path(root)
    stem = f"{main.stem}-selfdraft-{settings.name}"
    return DraftFolders(data=root / f"{stem}-data", hf=root / f"{stem}-hf",
                        openvino=root / f"{stem}-{settings.draft_weight_format}-ov",
                        trimmed=root / f"{stem}-{settings.draft_weight_format}-trimmed-ov")
