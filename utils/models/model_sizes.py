"""Folder sizes of model variants, measured on disk and compared with the estimates.
"""
from __future__ import annotations

from collections.abc import Sequence

from utils.models.atomic_folder import folder_size_bytes
from utils.models.model_catalogue import ModelSpec


def size_rows(specs: Sequence[ModelSpec]) -> list[dict]:
    """Measured size of each prepared weight file and of the whole folder, with the estimate."""
    rows = []
    for spec in specs:
        weights = spec.path / "openvino_model.bin"
        rows.append({
            "variant": spec.weight_format,
            "folder": spec.folder_name,
            "weights MB (measured)": weights.stat().st_size / 1e6,
            "folder MB (measured)": folder_size_bytes(spec.path) / 1e6,
            "estimate MB": spec.disk_gb * 1e3,
            "bits per weight (measured)": weights.stat().st_size * 8 / spec.parameters,
        })
    return rows


def plot_sizes(rows: Sequence[dict]):
    """Bar chart of measured weight sizes against the estimate, one bar pair per variant."""
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.2))
    positions = range(len(rows))
    axis.bar([p - 0.2 for p in positions], [r["weights MB (measured)"] for r in rows], width=0.4, label="measured")
    axis.bar([p + 0.2 for p in positions], [r["estimate MB"] for r in rows], width=0.4, label="estimate", alpha=0.6)
    for position, row in zip(positions, rows, strict=True):
        axis.annotate(f"{row['bits per weight (measured)']:.1f} bit/w", (position - 0.2, row["weights MB (measured)"]),
                      ha="center", va="bottom", fontsize=8)
    axis.set_xticks(list(positions), [r["variant"] for r in rows])
    axis.set_ylabel("MB on disk")
    axis.set_title("Weights of the same model at three precisions")
    axis.legend()
    figure.tight_layout()
    return figure
