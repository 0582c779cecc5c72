"""Tests for utils.training.draft_export: trimming an OpenVINO output layer (a tiny graph, then the offline pair's graph)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from draft_standins import VOCAB

from utils.models.atomic_folder import read_marker
from utils.training import draft_export as dx
from utils.training import draft_settings as ds


def test_trimmed_output_layer_keeps_the_used_logits_and_silences_the_rest(tmp_path: Path) -> None:
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as opset

    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((VOCAB, 8)).astype(np.float16)
    hidden = opset.parameter([-1, -1, 8], ov.Type.f32, name="hidden")
    logits = opset.matmul(hidden, opset.convert(opset.constant(embeddings), ov.Type.f32), False, True)
    logits.output(0).get_tensor().set_names({"logits"})
    model = ov.Model([opset.result(logits)], [hidden], "tiny")
    source = tmp_path / "exported"
    source.mkdir()
    ov.save_model(model, source / "openvino_model.xml", compress_to_fp16=False)
    (source / "config.json").write_text("{}")
    keep = [2, 9, 17, 33]
    trimmed = dx.trim_output_layer(source, tmp_path / "trimmed", keep, {"test": 1})
    assert (trimmed / "config.json").exists() and read_marker(trimmed)["recipe"] == {"test": 1}
    compiled = ov.Core().compile_model(trimmed / "openvino_model.xml", "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    inputs = rng.standard_normal((1, 3, 8)).astype(np.float32)
    output = compiled(inputs)[compiled.output("logits")]
    expected = inputs @ embeddings.astype(np.float32).T
    assert output.shape == (1, 3, VOCAB)
    np.testing.assert_allclose(output[..., keep], expected[..., keep], rtol=1e-4, atol=1e-4)
    others = [token for token in range(VOCAB) if token not in keep]
    assert np.all(output[..., others] == -1e4)
    assert set(output.argmax(-1).ravel()) <= set(keep)


def test_trimming_refuses_a_graph_it_does_not_understand(offline_pair, tmp_path: Path) -> None:
    with pytest.raises(ds.TrainingError, match="constant"):
        dx.trim_output_layer(offline_pair.draft, tmp_path / "trimmed-int4", [1, 2, 3], {"test": 1})
