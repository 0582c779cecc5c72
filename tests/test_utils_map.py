"""utils/README.md lists every module of utils/ (and nothing that is gone), so a newcomer can find their way."""
from __future__ import annotations

import re

from utils.paths import REPO_ROOT

UTILS = REPO_ROOT / "utils"


def test_every_module_is_on_the_map_and_the_map_has_no_ghosts() -> None:
    listed = set(re.findall(r"^\| `(\w+\.py)` \|", (UTILS / "README.md").read_text(encoding="utf-8"), re.M))
    modules = {path.name for path in UTILS.glob("*.py") if path.name != "__init__.py"}
    assert not modules - listed, f"add these modules to utils/README.md: {sorted(modules - listed)}"
    assert not listed - modules, f"utils/README.md lists modules that do not exist: {sorted(listed - modules)}"


def test_modules_over_500_lines_say_why_at_their_top() -> None:
    long = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in UTILS.glob("*.py")}
    unexplained = [name for name, lines in long.items() if lines > 520
                   and "Why one module" not in (UTILS / name).read_text(encoding="utf-8")[:4000]]
    assert not unexplained, f"split these modules or say at their top why not ('Why one module'): {unexplained}"
