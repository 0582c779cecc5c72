"""Where a speculative output parts from plain under the exact f32 main model: `report_exactness`.

Under f32 a (K+1)-token pass sums in another order than a one-token step, so where the two best logits nearly tie a
token can flip; each parting is printed with its top-1 minus top-2 logit margin. With SPECDEC_STRICT_EXACTNESS=1
(set by `tutorial.py test`) a parting fails the run instead.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from utils.decoding.generation import GenerationRecord
from utils.decoding.prompts import get_prompt

STRICT_EXACTNESS_ENV = "SPECDEC_STRICT_EXACTNESS"


@dataclass(frozen=True)
class Parting:
    """An output that parts from its plain run: at which generated token, and the main model's logit margin there."""

    prompt_id: str
    label: str  # mode and setting, and the stack when it is not OpenVINO GenAI
    position: int
    margin: float | None  # top-1 minus top-2 logit of the exact main model; None when not computed

    def line(self) -> str:
        margin = "not computed" if self.margin is None else f"{self.margin:.3f}"
        return (f"{self.prompt_id} ({self.label}): parts from plain at generated token {self.position}; "
                f"the main model's top-1 minus top-2 logit there: {margin}")


def strict_exactness(environ: Mapping[str, str] | None = None) -> bool:
    """True under the test command: an output that parts from plain fails the run."""
    value = (os.environ if environ is None else environ).get(STRICT_EXACTNESS_ENV, "")
    return value.strip().lower() in ("1", "true", "yes")


def require_exact(parted: int, what: str, environ: Mapping[str, str] | None = None) -> None:
    """Fail (AssertionError) when `parted` outputs parted from plain and the strict check is on."""
    if parted and strict_exactness(environ):
        raise AssertionError(f"{parted} {what} parted from plain greedy output ({STRICT_EXACTNESS_ENV}=1, as under "
                             "the test command): see the lines above for where and how near a tie")


def partings(records: Sequence[GenerationRecord], main_dir: Path | str | None = None, device: str = "CPU",
             prompt_texts: Mapping[str, str] | None = None) -> list[Parting]:
    """Non-plain compared `records` that part from their stack's plain run; margins only with `main_dir` given."""
    plain: dict[tuple[str, str], GenerationRecord] = {}
    for record in records:
        if record.mode == "plain":
            plain.setdefault((record.stack, record.prompt_id), record)
    found = []
    for record in records:
        if record.mode == "plain" or record.identical_to_plain is not False:
            continue
        reference = plain[(record.stack, record.prompt_id)]
        position = record.first_difference
        if position is None:  # one output is the other's beginning
            position = min(len(reference.token_ids), len(record.token_ids))
        margin = None
        if main_dir is not None:
            text = (prompt_texts or {}).get(record.prompt_id) or get_prompt(record.prompt_id).text
            margin = _margin(Path(main_dir), text, reference.token_ids, position, device)
        label = f"{record.mode} {record.setting}" + ("" if record.stack == "openvino_genai" else f", {record.stack}")
        found.append(Parting(record.prompt_id, label, position, margin))
    return found


def report_exactness(records: Sequence[GenerationRecord], main_dir: Path | str | None = None, device: str = "CPU",
                     what: str = "speculative outputs", prompt_texts: Mapping[str, str] | None = None,
                     environ: Mapping[str, str] | None = None) -> list[Parting]:
    """Print where each output parts from plain and how near a tie, then how many equal plain; see `require_exact`."""
    parted = partings(records, main_dir, device, prompt_texts)
    for parting in parted:
        print(parting.line())
    checked = sum(record.mode != "plain" and record.identical_to_plain is not None for record in records)
    print(f"f32: {checked - len(parted)} of {checked} {what} equal plain greedy output token for token"
          + ("" if not parted else " (a near-tie can flip a token: a (K+1)-token pass sums in another order)"))
    require_exact(len(parted), what, environ)
    return parted


def _margin(main_dir: Path, text: str, plain_ids: Sequence[int], position: int, device: str) -> float:
    import openvino_genai as ov_genai

    from utils.decoding.generation import encode_prompt
    from utils.decoding.generation_reports import divergence_margin

    prompt_ids = encode_prompt(ov_genai.Tokenizer(str(main_dir)), text)
    return divergence_margin(main_dir, prompt_ids, plain_ids, position, device)
