"""Notebook 08's EAGLE-3 head on the training scaffold: settings, presets, folders and recipes.

`eagle3_build.prepare_eagle3_head` runs its stages: data, tapped states, vocabulary, training, folder, export.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from utils.input_checks import as_integer
from utils.paths import models_dir
from utils.training.scaffold import MainModel, TrainingError, TrainingSettings, stage_recipe

# The code a trained head depends on (not the build's stage order, checks or tree-mode runs).
HEAD_CODE = ("utils.training.eagle3_head", "utils.training.eagle3_train", "utils.training.eagle3_vocab",
             "utils.training.eagle3_hidden", "utils.training.eagle3_folder")


@dataclass(frozen=True)
class Eagle3Settings(TrainingSettings):
    """Everything that decides which head comes out; `step_weight ** j` weighs unroll step j's loss.
    With `answers_only` only answer positions carry loss; `weight_format` is the exported head's."""

    prompt_max_tokens: int = 40
    learning_rate: float = 1.5e-3
    draft_vocab_size: int = 4096
    intermediate_size: int = 1536
    unroll_steps: int = 3
    step_weight: float = 0.8
    sequence_length: int = 512
    batch_tokens: int = 1024
    validation_share: float = 0.05
    answers_only: bool = True
    weight_format: str = "fp16"

    def __post_init__(self) -> None:
        self.check_shared()
        for key in ("draft_vocab_size", "intermediate_size", "unroll_steps", "sequence_length", "batch_tokens"):
            object.__setattr__(self, key, as_integer(getattr(self, key), key, minimum=1, error=TrainingError))
        if not 0.0 < self.step_weight <= 1.0:
            raise TrainingError(f"step_weight must lie in (0, 1], got {self.step_weight}.")
        if not 0.0 <= self.validation_share < 0.5:
            raise TrainingError("validation_share must lie in [0, 0.5).")
        if self.weight_format not in ("fp16", "int8"):
            raise TrainingError(f"weight_format must be fp16 or int8, got {self.weight_format!r}.")


Eagle3Settings.PRESETS = {
    # the test command's quick run: every stage must run and stay lossless
    "quick": Eagle3Settings(),
    # the notebook's reference run: ~100x the data; int8 for a cheaper draft step (the main decides every token)
    "reference": Eagle3Settings(name="reference", prompts=3000, answer_max_tokens=128, concurrent_sequences=64,
                                epochs=3.0, weight_format="int8"),
}


@dataclass(frozen=True)
class Eagle3Folders:
    """Where each stage of one head lives."""

    data: Path  # the main's prompts and greedy answers
    hidden: Path  # the tapped hidden states, the main's greedy choices
    head: Path  # the trained head in the SpecForge layout (Hugging Face format)
    exported: Path  # its optimum-cli export: the folder `openvino_genai.draft_model` loads


def eagle3_folders(settings: Eagle3Settings, main: MainModel, root: Path | None = None) -> Eagle3Folders:
    """Folders named after the main and the preset ("smollm2-135m-eagle3-quick-hf", ...) under the models folder."""
    root = models_dir() if root is None else Path(root)
    stem = f"{main.stem}-eagle3-{settings.name}"
    return Eagle3Folders(data=root / f"{stem}-data", hidden=root / f"{stem}-hidden", head=root / f"{stem}-hf",
                         exported=root / f"{stem}-{settings.weight_format}-ov")


def hidden_recipe(settings: Eagle3Settings, main_ov_dir: Path, data_dir: Path) -> dict:
    """What the tapped states depend on: the data, the main, the sequence length, the tapping code."""
    return stage_recipe("eagle3-hidden", {"main": Path(main_ov_dir).name, "sequence_length": settings.sequence_length},
                        [data_dir, main_ov_dir], ("openvino",), ("utils.training.eagle3_hidden",))


def head_recipe(settings: Eagle3Settings, hidden_dir: Path, main_hf_dir: Path) -> dict:
    """What the trained head depends on: its inputs, torch, its code, every setting but `weight_format` and `name`."""
    trained_by = {key: value for key, value in settings.as_dict().items() if key not in ("weight_format", "name")}
    return stage_recipe("eagle3-head", trained_by, [hidden_dir, main_hf_dir], ("torch",), HEAD_CODE)
