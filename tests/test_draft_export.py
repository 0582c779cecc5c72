"""Tests for utils.training.draft_export's trimming step on the offline pair's real graph (tests/test_output_layer.py
covers trimming tiny graphs)."""
from __future__ import annotations

import openvino as ov
import pytest

from utils.models.output_layer import OutputLayerError, trim_output_layer_graph


def test_trimming_refuses_a_compressed_output_layer(offline_pair) -> None:
    model = ov.Core().read_model(offline_pair.draft / "openvino_model.xml")  # int4 weights
    with pytest.raises(OutputLayerError, match="constant"):
        trim_output_layer_graph(model, [1, 2, 3])
