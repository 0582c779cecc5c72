"""Tests for utils.models.output_layer on tiny OpenVINO graphs built in memory: the trimmed layer gives the kept
tokens their logits and every other token MASKED_LOGIT, whichever way the weights are laid out, and graphs it
cannot trim (no MatMul head, compressed weights, ids outside the vocabulary) are refused with OutputLayerError.

(tests/test_draft_export.py trims a saved graph through utils.training.draft_export.)
"""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as opset
import pytest

from utils.models.output_layer import MASKED_LOGIT, OutputLayerError, trim_output_layer_graph

HIDDEN, VOCAB = 6, 20
RNG = np.random.default_rng(7)
EMBEDDINGS = RNG.standard_normal((VOCAB, HIDDEN)).astype(np.float32)  # one row per token id
STATES = RNG.standard_normal((2, 3, HIDDEN)).astype(np.float32)  # batch 2, 3 positions


def output_model(weights_layout: str = "vocab x hidden", weights_type: str = "f32", name: str = "logits") -> ov.Model:
    """hidden -> MatMul(hidden, W) -> "logits", with W stored as an optimum export could store it."""
    hidden = opset.parameter([-1, -1, HIDDEN], ov.Type.f32, name="hidden")
    stored = EMBEDDINGS if weights_layout == "vocab x hidden" else np.ascontiguousarray(EMBEDDINGS.T)
    if weights_type == "f16":
        weights = opset.convert(opset.constant(stored.astype(np.float16)), ov.Type.f32)
    elif weights_type == "compressed":  # int8 weights times a scale: what weight compression writes
        quantised = opset.convert(opset.constant(np.round(stored * 10).astype(np.int8)), ov.Type.f32)
        weights = opset.multiply(quantised, opset.constant(np.float32(0.1)))
    else:
        weights = opset.constant(stored)
    logits = opset.matmul(hidden, weights, False, weights_layout == "vocab x hidden")
    logits.output(0).get_tensor().set_names({name})
    return ov.Model([opset.result(logits)], [hidden], "tiny-head")


def run(model: ov.Model) -> np.ndarray:
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled(STATES)[compiled.output("logits")]


@pytest.mark.parametrize("layout", ["vocab x hidden", "hidden x vocab"])
@pytest.mark.parametrize("weights_type", ["f32", "f16"])
def test_kept_tokens_keep_their_logits_and_the_others_are_masked(layout: str, weights_type: str) -> None:
    model = output_model(layout, weights_type)
    full = run(model)
    keep = [0, 4, 5, 19]
    trimmed = trim_output_layer_graph(model, [19, 5, 4, 0, 5])  # any order, duplicates allowed
    assert trimmed is model  # edited in place
    output = run(trimmed)
    assert output.shape == (2, 3, VOCAB)
    np.testing.assert_allclose(output[..., keep], full[..., keep], rtol=1e-5, atol=1e-5)
    others = [token for token in range(VOCAB) if token not in keep]
    assert np.all(output[..., others] == np.float32(MASKED_LOGIT))
    assert set(output.argmax(-1).ravel().tolist()) <= set(keep)


def test_the_trimmed_graph_keeps_the_logits_name_on_its_new_output() -> None:
    model = trim_output_layer_graph(output_model(), range(3))
    assert "logits" in model.output(0).get_names()
    assert model.get_results()[0].input_value(0).get_node().get_type_name() == "Gather"
    names = [name for node in model.get_ordered_ops() if node.get_type_name() == "MatMul"
             for name in node.output(0).get_names()]
    assert names == []  # the old head gave its name away


def test_a_single_kept_token_gets_argmax_everywhere() -> None:
    output = run(trim_output_layer_graph(output_model(), [7]))
    assert np.all(output.argmax(-1) == 7)


def test_a_graph_that_does_not_end_in_a_matmul_is_refused() -> None:
    hidden = opset.parameter([-1, -1, HIDDEN], ov.Type.f32, name="hidden")
    scaled = opset.multiply(hidden, opset.constant(np.float32(2.0)))
    scaled.output(0).get_tensor().set_names({"logits"})
    model = ov.Model([opset.result(scaled)], [hidden], "no-head")
    with pytest.raises(OutputLayerError, match="does not end in MatMul"):
        trim_output_layer_graph(model, [1])


def test_a_graph_without_a_logits_output_is_refused() -> None:
    model = output_model(name="hidden_states")
    with pytest.raises(OutputLayerError, match="does not end in MatMul"):
        trim_output_layer_graph(model, [1])


def test_compressed_weights_are_refused() -> None:
    with pytest.raises(OutputLayerError, match="compressed: trim an fp16 export, then compress"):
        trim_output_layer_graph(output_model(weights_type="compressed"), [1, 2])


@pytest.mark.parametrize("keep", [[], [-1, 2], [3, VOCAB]])
def test_token_ids_outside_the_vocabulary_are_refused(keep: list[int]) -> None:
    with pytest.raises(OutputLayerError, match=rf"must lie in \[0, {VOCAB}\) and not be empty"):
        trim_output_layer_graph(output_model(), keep)
