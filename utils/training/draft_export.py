"""Stage 3 of notebook 06's draft: `prepare_exported_draft` runs `optimum-cli export openvino`, then trims the
output layer to the trained tokens (`trim_output_layer`); the trimmed folder is the draft to use.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from utils.models.atomic_folder import COMPLETE_MARKER, atomic_folder, is_up_to_date, read_marker
from utils.training.draft_settings import DraftFolders, DraftTrainingSettings, draft_folders
from utils.training.draft_train import VOCABULARY_FILE
from utils.training.scaffold import MainModel, TrainingError, as_main_model, require_complete


def trim_output_layer(source_dir: Path, destination: Path, keep_token_ids: Sequence[int], recipe: dict) -> Path:
    """Copy an exported draft, its output layer computing only `keep_token_ids` (others get logit -1e4).
    A Gather spreads the kept logits back over the full vocabulary, so the draft still speaks the main's token ids."""
    import shutil

    import openvino as ov

    from utils.models.output_layer import OutputLayerError, trim_output_layer_graph

    source_dir = Path(source_dir)
    model = ov.Core().read_model(source_dir / "openvino_model.xml")
    try:
        trim_output_layer_graph(model, keep_token_ids)
    except OutputLayerError as error:
        raise TrainingError(f"Cannot trim {source_dir}: {error}") from None
    with atomic_folder(destination, recipe) as work:
        for item in source_dir.iterdir():
            if item.is_file() and not item.name.startswith("openvino_model.") and item.name != COMPLETE_MARKER:
                shutil.copy2(item, work / item.name)
        ov.save_model(model, work / "openvino_model.xml")
    return Path(destination)


def prepare_exported_draft(settings: DraftTrainingSettings | str, main: MainModel | str,
                           force: bool = False) -> DraftFolders:
    """Export (or reuse) the trained draft with `optimum-cli export openvino`, then trim its output layer."""
    from utils.models.optimum_export import export_recipe, export_with_optimum

    settings = DraftTrainingSettings.preset(settings)
    folders = draft_folders(settings, as_main_model(main))
    require_complete(folders.hf, "trained draft", "train it first with utils.training.draft_train.prepare_trained_draft")
    recipe = export_recipe(1, (read_marker(folders.hf) or {}).get("recipe"), settings.draft_weight_format)
    if not force and is_up_to_date(folders.openvino, recipe):
        print(f"Reusing the exported draft in {folders.openvino}")
    else:
        export_with_optimum(str(folders.hf), folders.openvino, settings.draft_weight_format, recipe,
                            local_folder=True)
    trim_recipe = {"trimmed_from": recipe, "stage": "trim"}
    if not force and is_up_to_date(folders.trimmed, trim_recipe):
        print(f"Reusing the trimmed draft in {folders.trimmed}")
    else:
        keep = json.loads((folders.hf / VOCABULARY_FILE).read_text(encoding="utf-8"))
        trim_output_layer(folders.openvino, folders.trimmed, keep, trim_recipe)
    return folders
