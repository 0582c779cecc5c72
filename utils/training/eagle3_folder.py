"""Stage 5 of an EAGLE-3 head: its folder in the SpecForge layout, written atomically, and its export.

`export_head` keeps an export only if it carries `eagle3_mode` (config.json architectures: LlamaForCausalLMEagle3).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from utils.models.atomic_folder import atomic_folder, read_marker
from utils.training.scaffold import TrainingError, copy_tokenizer_files

if TYPE_CHECKING:
    from utils.training.eagle3_head import Eagle3Head, HeadShape

ARCHITECTURE = "LlamaForCausalLMEagle3"
RECIPE_FILE = "eagle3_recipe.json"
TRAINING_FILE = "eagle3_training.json"
WEIGHTS_FILE = "model.safetensors"


def head_config(shape: HeadShape, main_config: dict) -> dict:
    """The head's config.json (SpecForge layout) for a main whose config.json is `main_config`."""
    return {
        "architectures": [ARCHITECTURE],
        "model_type": "llama",
        "hidden_size": shape.hidden_size,
        "target_hidden_size": shape.target_hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": 1,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_theta": shape.rope_theta,
        "rope_parameters": {"rope_theta": shape.rope_theta, "rope_type": "default"},
        "max_position_embeddings": shape.max_position_embeddings,
        "vocab_size": shape.vocab_size,
        "draft_vocab_size": shape.draft_vocab_size,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": main_config.get("bos_token_id"),
        "eos_token_id": main_config.get("eos_token_id"),
        "pad_token_id": main_config.get("pad_token_id"),
        "torch_dtype": "float32",
        "use_cache": True,
    }


def state_dict_for_folder(head: Eagle3Head, include_embedding: bool = True) -> dict[str, Any]:
    """The head's tensors under SpecForge names, contiguous, d2t int64 and t2d bool."""
    import torch

    tensors = {name: tensor.detach().contiguous() for name, tensor in head.state_dict().items()
               if include_embedding or not name.startswith("embed_tokens")}
    tensors["d2t"] = tensors["d2t"].to(torch.int64)
    tensors["t2d"] = tensors["t2d"].to(torch.bool)
    return tensors


def save_head_folder(head: Eagle3Head, main_hf_dir: Path, folder: Path, recipe: dict, training: dict | None = None,
                     include_embedding: bool = False) -> Path:
    """Write the head's folder atomically; `training` is kept so that a reused head still shows its curves."""
    from safetensors.torch import save_file

    main_config = json.loads((Path(main_hf_dir) / "config.json").read_text(encoding="utf-8"))
    with atomic_folder(Path(folder), recipe) as work:
        (work / "config.json").write_text(json.dumps(head_config(head.shape, main_config), indent=2),
                                          encoding="utf-8")
        save_file(state_dict_for_folder(head, include_embedding), str(work / WEIGHTS_FILE),
                  metadata={"format": "pt"})
        copy_tokenizer_files(Path(main_hf_dir), work)
        (work / RECIPE_FILE).write_text(json.dumps(recipe, indent=2), encoding="utf-8")
        if training is not None:
            (work / TRAINING_FILE).write_text(json.dumps(training, indent=1), encoding="utf-8")
    return Path(folder)


def load_head_folder(folder: Path) -> Eagle3Head:
    """A head saved by `save_head_folder`, back in torch (to continue training it)."""
    from safetensors.torch import load_file

    from utils.training.eagle3_head import Eagle3Head, HeadShape

    config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    shape = HeadShape(hidden_size=config["hidden_size"], target_hidden_size=config["target_hidden_size"],
                      intermediate_size=config["intermediate_size"], num_attention_heads=config["num_attention_heads"],
                      num_key_value_heads=config["num_key_value_heads"], head_dim=config["head_dim"],
                      rms_norm_eps=config["rms_norm_eps"], rope_theta=config["rope_theta"],
                      vocab_size=config["vocab_size"], draft_vocab_size=config["draft_vocab_size"],
                      max_position_embeddings=config["max_position_embeddings"])
    head = Eagle3Head(shape)
    missing, unexpected = head.load_state_dict(load_file(str(Path(folder) / WEIGHTS_FILE)), strict=False)
    if unexpected or [name for name in missing if not name.startswith("embed_tokens")]:
        raise TrainingError(f"{folder}: weights do not fit the head (missing {missing}, unexpected {unexpected}).")
    return head


EXPORT_EXTRA_ARGS = ("--trust-remote-code",)


def export_head(head_dir: Path, output_dir: Path, weight_format: str = "fp16") -> Path:
    """`optimum-cli export openvino` of a head folder, atomically, checked for `eagle3_mode`; reused if up to date."""
    from utils.models.atomic_folder import is_up_to_date
    from utils.models.optimum_export import export_recipe, export_with_optimum
    from utils.training.eagle3_checks import check_export_packages, check_head_folder, require_eagle3_mode

    check_head_folder(Path(head_dir))
    check_export_packages()
    recipe = export_recipe(1, (read_marker(Path(head_dir)) or {}).get("recipe"), weight_format,
                           EXPORT_EXTRA_ARGS)
    if is_up_to_date(Path(output_dir), recipe):
        import shlex

        from utils.models.optimum_export import optimum_export_command

        command = optimum_export_command(str(head_dir), Path(output_dir), weight_format, EXPORT_EXTRA_ARGS, True)
        print(f"reusing {Path(output_dir).name}, exported earlier by:\n$", shlex.join(["optimum-cli", *command[1:]]))
        return Path(output_dir)
    return export_with_optimum(str(head_dir), Path(output_dir), weight_format, recipe, EXPORT_EXTRA_ARGS,
                               local_folder=True, check=require_eagle3_mode)
