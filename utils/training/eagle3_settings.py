"""What decides an EAGLE-3 head: its settings (two presets), the main model it reads, its folders and recipes.

A head is trained for one main model in stages, each cached in its own folder
under `models_dir()` (built atomically, reused while its recipe matches), the
way notebook 06's draft is. The stages, in the order of use:

1. `utils.training.eagle3_data` - the main writes prompts and greedy answers (OpenVINO GenAI);
2. `utils.training.eagle3_hidden` - the main's three tapped hidden states and greedy choices (an OpenVINO prefill);
3. `utils.training.eagle3_vocab` - the draft vocabulary and its maps `d2t` / `t2d`;
4. `utils.training.eagle3_head` (the head) and `utils.training.eagle3_train` (the training-time unroll);
5. `utils.training.eagle3_folder` - the SpecForge-layout folder and its `optimum-cli` export (`eagle3_mode`);
6. `utils.training.eagle3_build` - all of the above in one call, and the tree-mode KV-cache check.

`utils.training.eagle3_checks` holds the input checks that run before any of it.
The main model is `utils.training.draft_settings.MainModel` (its OpenVINO and Hugging Face folders).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

from utils.input_checks import as_integer
from utils.models.atomic_folder import read_marker
from utils.paths import models_dir
from utils.system.environment_report import package_versions
from utils.training.draft_settings import MainModel

RECIPE_VERSION = 1


class Eagle3Error(ValueError):
    """An input or a setting that cannot work; the message says what to do instead."""


_POSITIVE_INTEGERS = ("prompts", "prompt_max_tokens", "answer_max_tokens", "concurrent_sequences", "draft_vocab_size",
                      "intermediate_size", "unroll_steps", "sequence_length", "batch_tokens", "warmup_steps")


@dataclass(frozen=True)
class Eagle3Settings:
    """Everything that decides which head comes out.

    Data: `prompts` user prompts sampled from the main (`prompt_max_tokens` each, a share `steered_share` started
    by a task opener), each answered greedily with at most `answer_max_tokens`, `concurrent_sequences` at a time.
    Head: one decoder layer with an `intermediate_size` MLP and a `draft_vocab_size` output layer. Training:
    `unroll_steps` training-time-test steps weighted `step_weight ** j`, `epochs` passes (stopped after
    `max_training_minutes`), batches of `batch_tokens` positions from sequences cut to `sequence_length`,
    AdamW at `learning_rate` after `warmup_steps`; with `answers_only` the loss counts the answers' positions only
    (the prompts the main sampled teach nothing it will serve). `weight_format`: of the exported head.
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
    batch_tokens: int = 1024
    learning_rate: float = 1.5e-3
    warmup_steps: int = 5
    validation_share: float = 0.05
    answers_only: bool = True
    weight_format: str = "fp16"
    seed: int = 0

    def __post_init__(self) -> None:
        for key in _POSITIVE_INTEGERS:  # stored as plain ints: a NumPy integer would not go into a JSON recipe
            object.__setattr__(self, key, as_integer(getattr(self, key), key, minimum=1, error=Eagle3Error))
        if not 0.0 < self.step_weight <= 1.0:
            raise Eagle3Error(f"step_weight must lie in (0, 1], got {self.step_weight}.")
        if not 0.0 <= self.steered_share <= 1.0 or not 0.0 <= self.validation_share < 0.5:
            raise Eagle3Error("steered_share must lie in [0, 1] and validation_share in [0, 0.5).")
        if self.epochs <= 0 or self.max_training_minutes <= 0 or self.learning_rate <= 0:
            raise Eagle3Error("epochs, max_training_minutes and learning_rate must be > 0.")
        if self.weight_format not in ("fp16", "int8"):
            raise Eagle3Error(f"weight_format must be fp16 or int8, got {self.weight_format!r}.")

    def data_settings(self) -> dict:
        """The settings that decide the training data (and so the data folder's recipe)."""
        return {key: getattr(self, key) for key in ("prompts", "prompt_max_tokens", "steered_share",
                                                    "answer_max_tokens", "seed")}

    def as_dict(self) -> dict:
        return asdict(self)


PRESETS: dict[str, Eagle3Settings] = {
    # every stage in a few minutes on 2 cores (the test command's quick run): it must run and stay lossless
    "quick": Eagle3Settings(),
    # the notebook's reference run: about 100 times the data, longer answers, twenty minutes of training (08 §7
    # scores the head on the held-out prompts' answers beside its validation set: they differ from what the main
    # writes for itself). int8 weights for a cheaper draft step (the main decides every token, so the output stays
    # exact; 08 §7 prints c)
    "reference": Eagle3Settings(name="reference", prompts=3000, answer_max_tokens=128, concurrent_sequences=64,
                                epochs=30.0, max_training_minutes=20.0, weight_format="int8"),
}


def get_settings(preset: str | Eagle3Settings, **overrides: object) -> Eagle3Settings:
    """A preset by name ("quick", "reference") or the settings given, with `overrides` applied (checked)."""
    if isinstance(preset, Eagle3Settings):
        settings = preset
    else:
        try:
            settings = PRESETS[preset]
        except KeyError:
            raise Eagle3Error(f"Unknown preset '{preset}'. Use one of: {', '.join(PRESETS)}.") from None
    unknown = sorted(set(overrides) - set(settings.as_dict()))
    if unknown:
        raise Eagle3Error(f"Unknown settings {unknown}; Eagle3Settings has {sorted(settings.as_dict())}.")
    return replace(settings, **overrides) if overrides else settings  # type: ignore[arg-type]


@dataclass(frozen=True)
class Eagle3Folders:
    """Where each stage of one head lives."""

    data: Path  # the main's prompts and greedy answers
    hidden: Path  # the tapped hidden states, the main's greedy choices
    head: Path  # the trained head in the SpecForge layout (Hugging Face format)
    exported: Path  # its optimum-cli export: the folder `openvino_genai.draft_model` loads


def head_stem(main: MainModel) -> str:
    """"smollm2-135m-instruct-hf" -> "smollm2-135m-eagle3"."""
    return main.hf.name.removesuffix("-hf").removesuffix("-instruct") + "-eagle3"


def eagle3_folders(settings: Eagle3Settings, main: MainModel, root: Path | None = None) -> Eagle3Folders:
    """Folders named after the main and the preset ("smollm2-135m-eagle3-quick-hf", ...) under the models folder."""
    root = models_dir() if root is None else Path(root)
    stem = f"{head_stem(main)}-{settings.name}"
    return Eagle3Folders(data=root / f"{stem}-data", hidden=root / f"{stem}-hidden", head=root / f"{stem}-hf",
                         exported=root / f"{stem}-{settings.weight_format}-ov")


def data_recipe(settings: Eagle3Settings, main_ov_dir: Path) -> dict:
    """What the data folder depends on: the main's build, the data settings, the generating packages."""
    return {"recipe_version": RECIPE_VERSION, "stage": "eagle3-data", "main": Path(main_ov_dir).name,
            "main_recipe": (read_marker(main_ov_dir) or {}).get("recipe"), "settings": settings.data_settings(),
            "versions": package_versions(("openvino", "openvino-genai"), with_python=False)}


def hidden_recipe(settings: Eagle3Settings, main_ov_dir: Path, data_dir: Path) -> dict:
    """What the tapped states depend on: the data, the main, the sequence length."""
    return {"recipe_version": RECIPE_VERSION, "stage": "eagle3-hidden", "main": Path(main_ov_dir).name,
            "sequence_length": settings.sequence_length, "data_recipe": (read_marker(data_dir) or {}).get("recipe"),
            "versions": package_versions(("openvino",), with_python=False)}


def head_recipe(settings: Eagle3Settings, hidden_dir: Path, main_hf_dir: Path) -> dict:
    """What the trained head depends on: the tapped states, the main's weights, every setting but the export's
    weight format (its own folder's recipe) and the preset's name (a label), torch."""
    trained_by = {key: value for key, value in settings.as_dict().items() if key not in ("weight_format", "name")}
    return {"recipe_version": RECIPE_VERSION, "stage": "eagle3-head", "settings": trained_by,
            "hidden_recipe": (read_marker(hidden_dir) or {}).get("recipe"),
            "main_hf_recipe": (read_marker(main_hf_dir) or {}).get("recipe"),
            "versions": package_versions(("torch",), with_python=False)}
