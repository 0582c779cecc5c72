"""What a matplotlib figure draws, for tests that check plots by their data."""
from __future__ import annotations


def plotted_values(figure) -> list[float]:
    """Every number a matplotlib figure draws: line and marker coordinates, bar heights and widths."""
    import numpy as np
    from matplotlib.patches import Rectangle

    values: list[float] = []
    for axis in figure.axes:
        for line in axis.get_lines():
            values += [float(v) for v in np.ravel(line.get_xdata())] + [float(v) for v in np.ravel(line.get_ydata())]
        for patch in axis.patches:
            if isinstance(patch, Rectangle):
                values += [float(patch.get_height()), float(patch.get_width())]
        for collection in axis.collections:
            values += [float(v) for v in np.ravel(collection.get_offsets())]
    return values
