"""Stage 3 of notebook 06's draft: `prepare_exported_draft` runs `optimum-cli export openvino`, then trims the
output layer to the trained tokens (`utils.models.output_layer`); the trimmed folder is the draft to use.
"""
from __future__ import annotations

import json
import shutil

from utils.models.atomic_folder import COMPLETE_MARKER, atomic_folder, is_up_to_date, read_marker
from utils.training.draft_settings import DraftFolders, DraftTrainingSettings, draft_folders
from utils.training.draft_train import VOCABULARY_FILE
from utils.training.scaffold import MainModel, TrainingError, as_main_model, require_complete, stage_recipe


def prepare_exported_draft(settings: DraftTrainingSettings | str, main: MainModel | str) -> DraftFolders:
    """Export (or reuse) the trained draft with `optimum-cli export openvino`, then trim its output layer: only the
    trained tokens' logits are computed, the others get -1e4, so the draft still speaks the main's token ids."""
    import openvino as ov

    from utils.models.optimum_export import export_recipe, export_with_optimum
    from utils.models.output_layer import OutputLayerError, trim_output_layer_graph

    settings = DraftTrainingSettings.preset(settings)
    folders = draft_folders(settings, as_main_model(main))
    require_complete(folders.hf, "trained draft", "train it first with utils.training.draft_train.prepare_trained_draft")
    recipe = export_recipe(1, (read_marker(folders.hf) or {}).get("recipe"), settings.draft_weight_format)
    if is_up_to_date(folders.openvino, recipe):
        print(f"Reusing the exported draft in {folders.openvino}")
    else:
        export_with_optimum(str(folders.hf), folders.openvino, settings.draft_weight_format, recipe,
                            local_folder=True)
    trim_recipe = stage_recipe("trim", {}, [folders.openvino], ("openvino",),
                               ("utils.models.output_layer", "utils.training.draft_export"))
    if is_up_to_date(folders.trimmed, trim_recipe):
        print(f"Reusing the trimmed draft in {folders.trimmed}")
        return folders
    model = ov.Core().read_model(folders.openvino / "openvino_model.xml")
    try:
        trim_output_layer_graph(model, json.loads((folders.hf / VOCABULARY_FILE).read_text(encoding="utf-8")))
    except OutputLayerError as error:
        raise TrainingError(f"Cannot trim {folders.openvino}: {error}") from None
    with atomic_folder(folders.trimmed, trim_recipe) as work:
        for item in folders.openvino.iterdir():
            if item.is_file() and not item.name.startswith("openvino_model.") and item.name != COMPLETE_MARKER:
                shutil.copy2(item, work / item.name)
        ov.save_model(model, work / "openvino_model.xml")
    return folders
