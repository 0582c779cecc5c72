"""What decides an EAGLE-3 head: its settings (two presets), the main model, and where each stage is kept.

The pipeline's stages, each a function of its own module, in order of use:

1. `eagle3.data.write_training_data` - the main writes prompts and greedy answers (OpenVINO GenAI);
2. `eagle3.hidden.tap_hidden_states` - the main's tapped hidden states and greedy next token (transformers);
3. `eagle3.vocab.draft_vocabulary` - the most frequent target ids, `d2t` and `t2d`;
4. `eagle3.head` / `eagle3.train` - the head and its training with a training-time unroll;
5. `eagle3.folder.save_head_folder` - the SpecForge-layout folder with the main's tokenizer files;
6. `eagle3.export.export_head` - `optimum-cli export openvino`, checked for `eagle3_mode`;
7. `eagle3.evaluate` - plain vs EAGLE-3 (chain and tree) in openvino_genai.

`eagle3.checks` holds the input checks that run before any of it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

PROTOTYPE_ROOT = Path(__file__).resolve().parents[1]
REPO_ROOT = PROTOTYPE_ROOT.parents[1]
MODELS_DIR = REPO_ROOT / "models"


class Eagle3Error(ValueError):
    """An input or setting that cannot work; the message says what to do instead."""


@dataclass(frozen=True)
class Eagle3Settings:
    """Everything that decides which head comes out.

    Data: `prompts` user prompts sampled from the main (`prompt_max_tokens`
    each, a share `steered_share` started by a task opener), each answered
    greedily with at most `answer_max_tokens`. Head: one decoder layer with
    `intermediate_size` MLP and a `draft_vocab_size` output layer. Training:
    `unroll_steps` training-time-test steps weighted `step_weight ** j`,
    `epochs` passes (stopped after `max_training_minutes`), batches of
    `batch_tokens` positions in sequences of at most `sequence_length`. `max_tapping_minutes` bounds
    the hidden-state pass (the samples done by then are kept; None = all).
    """

    name: str = "quick"
    prompts: int = 32
    prompt_max_tokens: int = 40
    steered_share: float = 0.75
    answer_max_tokens: int = 64
    concurrent_sequences: int = 32
    draft_vocab_size: int = 4096
    intermediate_size: int = 1536
    unroll_steps: int = 3
    step_weight: float = 0.8
    epochs: float = 3.0
    max_training_minutes: float = 0.75
    sequence_length: int = 512
    batch_tokens: int = 2048
    learning_rate: float = 1e-3
    warmup_steps: int = 10
    validation_share: float = 0.05
    max_tapping_minutes: float | None = None
    weight_format: str = "fp16"
    seed: int = 0

    def __post_init__(self) -> None:
        for key in ("prompts", "prompt_max_tokens", "answer_max_tokens", "concurrent_sequences",
                    "draft_vocab_size", "intermediate_size", "unroll_steps", "sequence_length", "batch_tokens"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise Eagle3Error(f"{key} must be an integer >= 1, got {value!r}.")
        if not 0.0 < self.step_weight <= 1.0:
            raise Eagle3Error(f"step_weight must lie in (0, 1], got {self.step_weight}.")
        if not 0.0 <= self.steered_share <= 1.0 or not 0.0 <= self.validation_share < 0.5:
            raise Eagle3Error("steered_share must lie in [0, 1] and validation_share in [0, 0.5).")
        if self.epochs <= 0 or self.max_training_minutes <= 0 or self.learning_rate <= 0:
            raise Eagle3Error("epochs, max_training_minutes and learning_rate must be > 0.")
        if self.weight_format not in ("fp16", "int8"):
            raise Eagle3Error(f"weight_format must be fp16 or int8, got {self.weight_format!r}.")

    def data_settings(self) -> dict:
        """The settings that decide the training data."""
        keys = ("prompts", "prompt_max_tokens", "steered_share", "answer_max_tokens", "seed")
        return {key: getattr(self, key) for key in keys}

    def as_dict(self) -> dict:
        return asdict(self)


PRESETS: dict[str, Eagle3Settings] = {
    # the whole pipeline in a few minutes on 2 cores (CI): it must run and stay lossless, not be fast
    "quick": Eagle3Settings(),
    # the notebook's reference run: many more self-written prompts, longer answers, longer training
    "reference": Eagle3Settings(name="reference", prompts=640, concurrent_sequences=64, prompt_max_tokens=40,
                                answer_max_tokens=128,
                                draft_vocab_size=8192, epochs=8.0, max_training_minutes=14.0,
                                max_tapping_minutes=11.0,
                                learning_rate=1e-3, warmup_steps=50),
}


def get_settings(preset: str | Eagle3Settings, **overrides: object) -> Eagle3Settings:
    """A preset by name ("quick", "reference") or the settings given, with `overrides` applied."""
    if isinstance(preset, Eagle3Settings):
        settings = preset
    else:
        try:
            settings = PRESETS[preset]
        except KeyError:
            raise Eagle3Error(f"Unknown preset '{preset}'. Use one of: {', '.join(PRESETS)}.") from None
    return replace(settings, **overrides) if overrides else settings  # type: ignore[arg-type]


@dataclass(frozen=True)
class MainModel:
    """The main model a head is trained for: its OpenVINO folder (runs it) and Hugging Face folder (taps it)."""

    openvino: Path
    hf: Path

    @property
    def stem(self) -> str:
        """"smollm2-135m-instruct-hf" -> "smollm2-135m"."""
        return self.hf.name.removesuffix("-hf").removesuffix("-instruct")


OFFLINE_MAIN = MainModel(MODELS_DIR / "smollm2-135m-instruct-fp16-ov", MODELS_DIR / "smollm2-135m-instruct-hf")


@dataclass(frozen=True)
class StageFolders:
    """Where each stage of one head lives."""

    data: Path
    hidden: Path
    head: Path
    exported: Path


def stage_folders(settings: Eagle3Settings, main: MainModel, root: Path | None = None) -> StageFolders:
    """Folders named after the main and the preset ("smollm2-135m-eagle3-quick-hf", ...)."""
    root = PROTOTYPE_ROOT / "models" if root is None else Path(root)
    stem = f"{main.stem}-eagle3-{settings.name}"
    return StageFolders(data=root / f"{stem}-data", hidden=root / f"{stem}-hidden", head=root / f"{stem}-hf",
                        exported=root / f"{stem}-{settings.weight_format}-ov")
