"""Every test gets exactly one tier (tests/conftest.py), so `-m unit` is a quick loop that loads no model."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import MODEL_FIXTURES, TIERS, tier_of


def item(path: str, fixtures: tuple[str, ...] = (), marks: tuple[str, ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(fspath=path, fixturenames=list(fixtures),
                           iter_markers=lambda: [SimpleNamespace(name=name) for name in marks])


@pytest.mark.parametrize("test, tier", [
    (item("notebooks/02-x.ipynb"), "notebooks"),
    (item("tests/test_browser_playground.py"), "browser"),
    (item("tests/test_article_pairs.py"), "standins"),
    (item("tests/test_generation.py", fixtures=("offline_pair", "tmp_path")), "models"),
    (item("tests/test_coder_pair.py", fixtures=("prepared_coder_pair",)), "models"),
    (item("tests/test_speedup_model.py", fixtures=("tmp_path",)), "unit"),
    (item("tests/test_speedup_model.py", marks=("parametrize", "standins")), "standins"),  # an explicit tier wins
    (item("tests/test_notebook_outputs.py", marks=("parametrize", "freshness")), "freshness"),
    (item("tests/test_notebook_outputs.py", fixtures=("tmp_path",)), "unit"),
])
def test_each_test_gets_the_tier_of_what_it_needs(test: SimpleNamespace, tier: str) -> None:
    assert tier_of(test) == tier  # type: ignore[arg-type]


def test_every_tier_is_registered_and_the_model_fixtures_exist() -> None:
    ini = (Path(__file__).parent.parent / "pytest.ini").read_text(encoding="utf-8")
    assert all(f"    {tier}:" in ini for tier in TIERS) and "--strict-markers" in ini
    conftests = "".join(path.read_text(encoding="utf-8") for path in Path(__file__).parent.glob("*.py"))
    assert all(f"def {name}(" in conftests for name in MODEL_FIXTURES)


def test_this_test_is_in_the_unit_tier(request: pytest.FixtureRequest) -> None:
    assert [mark.name for mark in request.node.iter_markers() if mark.name in TIERS] == ["unit"]


def test_the_check_of_the_committed_outputs_is_out_of_the_quick_loop() -> None:
    """An edit of a utils module makes the committed outputs stale: `-m unit` must still pass, the full run must not."""
    from tests.test_notebook_outputs import test_committed_outputs_are_fresh

    assert "freshness" in {mark.name for mark in getattr(test_committed_outputs_are_fresh, "pytestmark", [])}
