"""What decides a trained draft: its settings, the main model it is trained for, its folders and their recipes.

A draft is trained for one main model (FastDraft in miniature, arXiv:2411.11055)
in four stages, each cached in its own folder under `models_dir()` (built
atomically, reused when its recipe - settings plus package versions - matches).
This module is what they share; the stages, in the order of use:

1. `utils.training.draft_data` - the main model writes its own training data (OpenVINO GenAI);
2. `utils.training.draft_model` (the draft's architecture) and `utils.training.draft_train` (training it in torch);
3. `utils.training.draft_export` - `optimum-cli export openvino`, then the output layer trimmed;
4. `utils.training.draft_evaluation` - the trained draft measured against plain decoding.

Start with `main_folders(pair)` (or `MainModel(...)` for folders of your own)
and `get_settings("quick")`; `draft_folders(settings, main)` says where each
stage's result lives.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from utils.input_checks import as_integer
from utils.models.atomic_folder import read_marker
from utils.models.model_check import is_complete
from utils.paths import models_dir
from utils.system.environment_report import package_versions

RECIPE_VERSION = 1


class DraftTrainingError(ValueError):
    """A setting or an input that cannot work; the message says what to do instead."""


@dataclass(frozen=True)
class DraftTrainingSettings:
    """Everything that decides what draft comes out (and so the folders' recipes).

    Data: `prompts` user prompts sampled from the main model (`prompt_max_tokens`
    each), a share `steered_share` of them started with a task opener; each
    answered greedily and `sampled_answers` times by sampling (`answer_max_tokens`).
    `teacher_top_k` next-token probabilities of the main model are kept per
    position (0 = no distillation). Draft: a Llama model `hidden_size` wide with
    `layers` layers. Training: `epochs` passes over the data (stopped early after
    `max_training_minutes`), `batch_size` sequences per step, learning rate
    `learning_rate`, loss = `distill_weight` * distillation + (1 - it) * cross-entropy.
    """

    name: str = "quick"
    prompts: int = 80
    prompt_max_tokens: int = 48
    steered_share: float = 0.75
    sampled_answers: int = 1
    answer_max_tokens: int = 128
    sampling_temperature: float = 0.8
    concurrent_sequences: int = 32
    teacher_top_k: int = 16
    hidden_size: int = 256
    layers: int = 4
    attention_heads: int = 4
    key_value_heads: int = 2
    intermediate_size: int = 768
    epochs: float = 12.0
    max_training_minutes: float = 4.0
    batch_size: int = 16
    learning_rate: float = 2e-3
    warmup_steps: int = 20
    distill_weight: float = 0.5
    restrict_vocabulary: bool = True
    final_norm_init: float = 1.0
    unused_token_scale: float = 0.25
    draft_weight_format: str = "fp16"
    seed: int = 0

    def __post_init__(self) -> None:
        positive_ints = ("prompts", "prompt_max_tokens", "answer_max_tokens", "concurrent_sequences", "hidden_size",
                         "layers", "attention_heads", "key_value_heads", "intermediate_size", "batch_size")
        for name in positive_ints:  # stored as plain ints: a NumPy integer would not go into a JSON recipe
            object.__setattr__(self, name, as_integer(getattr(self, name), name, minimum=1, error=DraftTrainingError))
        if self.sampled_answers < 0 or self.teacher_top_k < 0 or self.warmup_steps < 0:
            raise DraftTrainingError("sampled_answers, teacher_top_k and warmup_steps must be >= 0.")
        if not 0.0 <= self.steered_share <= 1.0 or not 0.0 <= self.distill_weight <= 1.0:
            raise DraftTrainingError("steered_share and distill_weight must lie in [0, 1].")
        if self.distill_weight > 0 and self.teacher_top_k == 0:
            raise DraftTrainingError("distill_weight > 0 needs teacher_top_k > 0 (the main's probabilities to "
                                     "distil). Set teacher_top_k, e.g. 16, or distill_weight=0.")
        if self.hidden_size % self.attention_heads:
            raise DraftTrainingError(f"hidden_size {self.hidden_size} must be a multiple of attention_heads "
                                     f"{self.attention_heads}.")
        if self.attention_heads % self.key_value_heads:
            raise DraftTrainingError(f"attention_heads {self.attention_heads} must be a multiple of "
                                     f"key_value_heads {self.key_value_heads}.")
        if self.epochs <= 0 or self.max_training_minutes <= 0 or self.learning_rate <= 0:
            raise DraftTrainingError("epochs, max_training_minutes and learning_rate must be > 0.")
        if self.sampling_temperature <= 0:
            raise DraftTrainingError("sampling_temperature must be > 0.")
        if self.draft_weight_format not in ("fp32", "fp16", "int8"):
            raise DraftTrainingError("draft_weight_format must be fp32, fp16 or int8 (a draft this small gains "
                                     "nothing from int4).")

    def data_settings(self) -> dict:
        """The settings that decide the training data (its folder's recipe)."""
        keys = ("prompts", "prompt_max_tokens", "steered_share", "sampled_answers", "answer_max_tokens",
                "sampling_temperature", "teacher_top_k", "seed")
        return {key: getattr(self, key) for key in keys}

    def draft_settings(self) -> dict:
        """The settings that decide the trained weights, given the data."""
        skip = set(self.data_settings()) | {"name", "concurrent_sequences", "draft_weight_format"}
        # the seed also decides the draft's initial weights and the batch order
        return {key: value for key, value in asdict(self).items() if key not in skip} | {"seed": self.seed}


PRESETS: dict[str, DraftTrainingSettings] = {
    # minutes on 2 cores: ~18k tokens of data, many epochs over them; shows the recipe end to end
    "quick": DraftTrainingSettings(),
    # about an hour on 2 cores: ~20x the data, ~8x the training
    "full": DraftTrainingSettings(name="full", prompts=1600, epochs=6.0, max_training_minutes=30.0),
    # about two minutes: the test command's run size (SPECDEC_RUN_SIZE=quick); checks the code, not the draft
    "tiny": DraftTrainingSettings(name="tiny", prompts=24, answer_max_tokens=64, epochs=4.0, max_training_minutes=1.0),
}


def get_settings(name_or_settings: str | DraftTrainingSettings) -> DraftTrainingSettings:
    """A preset by name ("quick", "full"), or the settings given."""
    if isinstance(name_or_settings, DraftTrainingSettings):
        return name_or_settings
    try:
        return PRESETS[name_or_settings]
    except KeyError:
        raise DraftTrainingError(f"Unknown training size '{name_or_settings}'. Use one of: {', '.join(PRESETS)}, "
                                 "or pass DraftTrainingSettings(...).") from None


PREPARE_THE_MAIN = "prepare the offline pair first: python3 tutorial.py lab, or python -m utils.models.offline_pair"


def require_complete(folder: Path, role: str, what_to_do: str = PREPARE_THE_MAIN) -> None:
    """Raise a DraftTrainingError, saying `what_to_do`, unless `folder` is a finished folder (`utils.models.atomic_folder`)."""
    if not is_complete(Path(folder)):
        raise DraftTrainingError(f"The {role} folder {folder} is missing or incomplete; {what_to_do}.")


# --------------------------------------------------------------------------- the main model


@dataclass(frozen=True)
class MainModel:
    """The main model a draft is trained for.

    `openvino`: its OpenVINO folder (it writes the training data, and is the
    main model of the measured pair); `hf`: its Hugging Face folder (the
    config, embeddings and tokenizer files the draft starts from); `label`:
    its name for tables.
    """

    openvino: Path
    hf: Path
    label: str = "main"

    @property
    def draft_stem(self) -> str:
        """Start of the folder names of what is trained for it: the Hugging Face folder's name without
        "-hf" and "-instruct", plus "-selfdraft" ("smollm2-135m-instruct-hf" -> "smollm2-135m-selfdraft")."""
        name = self.hf.name.removesuffix("-hf").removesuffix("-instruct")
        return f"{name}-selfdraft"


def main_folders(pair_name: str = "offline") -> MainModel:
    """The main model of a catalogue pair (`utils.models.model_catalogue`), its folders checked.

    Training a draft needs the main model's Hugging Face folder (for the
    embedding projection and the tokenizer files) as well as its OpenVINO
    folder, so only pairs whose main has `hf_folder_name` in the catalogue
    qualify; of the pairs here, the offline pair's SmolLM2-135M.
    """
    from utils.models.model_catalogue import get_pair

    try:
        spec = get_pair(pair_name).main
    except KeyError as error:
        raise DraftTrainingError(str(error.args[0])) from None
    if spec.hf_folder_name is None:
        raise DraftTrainingError(
            f"Pair '{pair_name}' has no Hugging Face folder for its main model ({spec.folder_name}) in "
            "utils.models.model_catalogue, and training a draft starts from one. The real pairs already have drafts "
            "(Phi-3-mini has OpenVINO's FastDraft-50M) and their mains are too slow on 2 CPU cores to write enough "
            "training data. Set PAIR = \"offline\", or pass MainModel(openvino_folder, hf_folder) of your own.")
    main = MainModel(spec.path, models_dir() / spec.hf_folder_name, spec.description.split(",")[0])
    require_complete(main.openvino, "main model (OpenVINO)")
    require_complete(main.hf, "main model (Hugging Face)")
    return main


def as_main_model(main: MainModel | str) -> MainModel:
    """A MainModel as given, or the main of the catalogue pair named `main`."""
    return main if isinstance(main, MainModel) else main_folders(main)


# --------------------------------------------------------------------------- folders and recipes


@dataclass(frozen=True)
class DraftFolders:
    """Where each stage of a draft lives."""

    data: Path  # main-written samples and the main's top-k probabilities
    hf: Path  # the trained draft, Hugging Face format
    openvino: Path  # its `optimum-cli export openvino` export (output layer over the whole vocabulary)
    trimmed: Path  # the export with its output layer trimmed to the tokens the data uses (the draft to use)


def draft_folders(settings: DraftTrainingSettings, main: MainModel, root: Path | None = None) -> DraftFolders:
    """Folders for the data, the trained Hugging Face draft and its OpenVINO exports, named after the main model."""
    root = models_dir() if root is None else Path(root)
    stem = f"{main.draft_stem}-{settings.name}"
    return DraftFolders(data=root / f"{stem}-data", hf=root / f"{stem}-hf",
                        openvino=root / f"{stem}-{settings.draft_weight_format}-ov",
                        trimmed=root / f"{stem}-{settings.draft_weight_format}-trimmed-ov")


def data_recipe(settings: DraftTrainingSettings, main_ov_dir: Path) -> dict:
    main_marker = read_marker(main_ov_dir) or {}
    return {"recipe_version": RECIPE_VERSION, "stage": "data", "main": main_ov_dir.name,
            "main_recipe": main_marker.get("recipe"), "settings": settings.data_settings(),
            "versions": package_versions(("openvino", "openvino-genai", "numpy"), with_python=False)}


def draft_recipe(settings: DraftTrainingSettings, data_dir: Path, main_hf_dir: Path) -> dict:
    return {"recipe_version": RECIPE_VERSION, "stage": "draft", "data_recipe": (read_marker(data_dir) or {}).get(
        "recipe"), "main_hf_recipe": (read_marker(main_hf_dir) or {}).get("recipe"),
            "settings": settings.draft_settings(),
            "versions": package_versions(("torch", "transformers"), with_python=False)}
