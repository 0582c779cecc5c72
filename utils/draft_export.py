"""Stage 3 of training a draft: export it to OpenVINO, then trim its output layer to the tokens it was trained on.

Order of use: after `utils.draft_train.prepare_trained_draft`,
`prepare_exported_draft(settings, main)` runs `optimum-cli export openvino` on
the trained Hugging Face draft and `trim_output_layer` on the export; both
folders come from `utils.draft_settings.draft_folders`, and the trimmed one is
the draft to use (`utils.draft_evaluation` measures it). Heavy imports are
done inside functions.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from utils.atomic_folder import COMPLETE_MARKER, atomic_folder, is_up_to_date
from utils.draft_settings import (DraftFolders, DraftTrainingError, DraftTrainingSettings, MainModel, as_main_model,
                                  draft_folders, export_recipe, get_settings, require_complete)
from utils.draft_train import VOCABULARY_FILE


def trim_output_layer(source_dir: Path, destination: Path, keep_token_ids: Sequence[int], recipe: dict) -> Path:
    """Copy an exported draft, its output layer computing only `keep_token_ids` (others get logit -1e4).

    A small draft spends most of a step on its output layer (hidden x 49,152
    tokens). Tokens its training data never used cannot be predicted well
    anyway, so the layer is cut to the used ones and a Gather spreads their
    logits back over the full vocabulary: the draft still speaks the main
    model's token ids, for a fraction of the cost (the idea of FR-Spec,
    arXiv:2502.14856). The edit is made on the OpenVINO graph:

        logits = MatMul(hidden, E^T)  ->  Gather(Pad(MatMul(hidden, E[keep]^T), -1e4), position of each token)
    """
    import shutil

    import numpy as np
    import openvino as ov
    import openvino.opset13 as opset

    source_dir = Path(source_dir)
    keep = np.asarray(sorted(set(int(t) for t in keep_token_ids)), dtype=np.int64)
    model = ov.Core().read_model(source_dir / "openvino_model.xml")
    result = next((r for r in model.get_results() if "logits" in r.input_value(0).get_names()), None)
    head = result.input_value(0).get_node() if result is not None else None
    if head is None or head.get_type_name() != "MatMul" or not head.get_attributes().get("transpose_b"):
        raise DraftTrainingError(f"{source_dir} does not end in MatMul(hidden, embeddings^T) -> logits; "
                                 "only plain optimum-cli exports of Llama drafts can be trimmed.")
    weights_node = head.input_value(1).get_node()
    while weights_node.get_type_name() != "Constant":
        if weights_node.get_type_name() != "Convert":
            raise DraftTrainingError("The output layer's weights are not a (converted) constant; cannot trim.")
        weights_node = weights_node.input_value(0).get_node()
    weights = weights_node.get_data()
    vocab_size = weights.shape[0]
    if keep.size == 0 or keep.min() < 0 or keep.max() >= vocab_size:
        raise DraftTrainingError(f"Token ids to keep must lie in [0, {vocab_size}) and not be empty.")
    kept = opset.convert(opset.constant(np.ascontiguousarray(weights[keep])), ov.Type.f32)
    small = opset.matmul(head.input_value(0), kept, False, True)
    padded = opset.pad(small, opset.constant(np.zeros(3, np.int64)), opset.constant(np.array([0, 0, 1], np.int64)),
                       "constant", opset.constant(np.float32(-1e4)))
    position = np.full(vocab_size, keep.size, dtype=np.int32)  # unknown tokens read the padded -1e4 column
    position[keep] = np.arange(keep.size, dtype=np.int32)
    logits = opset.gather(padded, opset.constant(position), opset.constant(np.int64(2)))
    names = head.output(0).get_names()
    head.output(0).get_tensor().set_names(set())
    logits.output(0).get_tensor().set_names(names)
    result.input(0).replace_source_output(logits.output(0))
    model.validate_nodes_and_infer_types()
    with atomic_folder(destination, recipe) as work:
        for item in source_dir.iterdir():
            if item.is_file() and not item.name.startswith("openvino_model.") and item.name != COMPLETE_MARKER:
                shutil.copy2(item, work / item.name)
        ov.save_model(model, work / "openvino_model.xml")
    return Path(destination)


def prepare_exported_draft(settings: DraftTrainingSettings | str, main: MainModel | str,
                           force: bool = False) -> DraftFolders:
    """Export (or reuse) the trained draft with `optimum-cli export openvino`, then trim its output layer."""
    from utils.optimum_export import export_with_optimum

    settings = get_settings(settings)
    folders = draft_folders(settings, as_main_model(main))
    require_complete(folders.hf, "trained draft", "train it first with utils.draft_train.prepare_trained_draft")
    recipe = export_recipe(settings, folders.hf)
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
