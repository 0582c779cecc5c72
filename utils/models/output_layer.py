"""Cut an OpenVINO model's output layer to some token ids, its logits still laid out over the full vocabulary.

A small draft spends much of a step on its output layer; only kept rows are computed and a Gather puts them back at
their token ids (others get -1e4), so the draft still speaks the main model's ids (FR-Spec, arXiv:2502.14856).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MASKED_LOGIT = -1e4


class OutputLayerError(ValueError):
    """The graph's output layer cannot be trimmed; the message says why."""


def trim_output_layer_graph(model: Any, keep_token_ids: Iterable[int]) -> Any:
    """Edit an OpenVINO model in place and return it: logits = Gather(Pad(MatMul(h, W[keep]^T), -1e4), position).

    Raises `OutputLayerError` unless it ends in MatMul(hidden, W) -> "logits" with W an uncompressed constant."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as opset

    keep = np.asarray(sorted(set(int(t) for t in keep_token_ids)), dtype=np.int64)
    result = next((r for r in model.get_results() if "logits" in r.input_value(0).get_names()), None)
    head = result.input_value(0).get_node() if result is not None else None
    if result is None or head is None or head.get_type_name() != "MatMul":
        raise OutputLayerError("The model does not end in MatMul(hidden, embeddings) -> logits: only plain "
                               "optimum-cli exports can be trimmed.")
    weights_node = head.input_value(1).get_node()
    while weights_node.get_type_name() == "Convert":
        weights_node = weights_node.input_value(0).get_node()
    if weights_node.get_type_name() != "Constant":
        raise OutputLayerError("The output layer's weights are not a (converted) constant, they are compressed: "
                               "trim an fp16 export, then compress.")
    weights = weights_node.get_data() if head.get_attributes().get("transpose_b") else weights_node.get_data().T
    vocab_size = weights.shape[0]
    if keep.size == 0 or keep.min() < 0 or keep.max() >= vocab_size:
        raise OutputLayerError(f"Token ids to keep must lie in [0, {vocab_size}) and not be empty.")
    kept = opset.convert(opset.constant(np.ascontiguousarray(weights[keep])), ov.Type.f32)
    rank = len(head.output(0).get_partial_shape())
    pads_end = np.eye(rank, dtype=np.int64)[-1]  # one extra last column, holding -1e4
    padded = opset.pad(opset.matmul(head.input_value(0), kept, False, True), opset.constant(np.zeros(rank, np.int64)),
                       opset.constant(pads_end), "constant", opset.constant(np.float32(MASKED_LOGIT)))
    position = np.full(vocab_size, keep.size, dtype=np.int32)  # tokens not kept read the padded column
    position[keep] = np.arange(keep.size, dtype=np.int32)
    logits = opset.gather(padded, opset.constant(position), opset.constant(np.int64(rank - 1)))
    names = head.output(0).get_names()
    head.output(0).get_tensor().set_names(set())
    logits.output(0).get_tensor().set_names(names)
    result.input(0).replace_source_output(logits.output(0))
    model.validate_nodes_and_infer_types()
    return model
