"""Choose per task type how to decode, then check the choice on held-out prompts: `python -m maintainers.tuner`.

    python -m maintainers.tuner --pair qwen2.5-coder
    python -m maintainers.tuner --tasks code chat -k 2 4 --thresholds 0.5 --json build/tuning.json

The command-line form of notebook 05's per-task tuner (`utils.tuning.task_tuner`); speed figures are printed,
never asserted.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from utils.decoding.prompts import TASKS
from utils.tuning.task_tuner import (
    SWITCH_MARGIN,
    TaskTuning,
    candidate_points,
    choice_rows,
    split_prompts,
    summary_line,
    tune_tasks,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m maintainers.tuner",
        description="Choose per task type between plain decoding, a draft (K or threshold) and prompt lookup, "
                    "then check each choice on held-out prompts (speed figures are printed, never asserted).")
    parser.add_argument("--pair", default="qwen2.5-coder", help="model pair from utils.models.model_catalogue")
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--tasks", nargs="+", default=["code", "chat", "input_grounded"], choices=TASKS)
    parser.add_argument("-k", "--ks", nargs="*", type=int, default=[2, 4], help="draft lengths to try")
    parser.add_argument("--thresholds", nargs="*", type=float, default=[], help="confidence thresholds to try")
    parser.add_argument("--lookup-ks", nargs="*", type=int, default=[3], help="prompt-lookup candidates to try")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per tuning prompt")
    parser.add_argument("--held-out-repeats", type=int, default=2, help="timed runs per held-out prompt")
    parser.add_argument("--margin", type=float, default=SWITCH_MARGIN,
                        help="a candidate must beat plain by more than this to be chosen")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH",
                        help="also write the choices, the tuning measurements and the machine here")
    return parser


def write_tuning_json(path: Path, tuning: TaskTuning, argv: Sequence[str]) -> None:
    """The choices, every tuning measurement's summary per task, the command and the machine, as JSON."""
    from maintainers.run_context import measurement_context
    from utils.result_files import write_json

    write_json(path, {
        "machine": measurement_context(),
        "command": "python -m maintainers.tuner " + " ".join(argv),
        "choices": [choice.as_dict() for choice in tuning.choices],
        "summary": summary_line(tuning.choices),
        "tuning_rows": tuning.sweep.rows(by="task"),
    }, default=str)


def main(argv: Sequence[str] | None = None) -> int:
    from maintainers.run_context import check_writable_file
    from utils.input_checks import InputError
    from utils.models.model_catalogue import get_pair
    from utils.models.model_check import check_pair
    from utils.tables import text_table

    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        pair = get_pair(arguments.pair)
        splits = split_prompts(arguments.tasks)
        points = candidate_points(arguments.ks, arguments.thresholds, arguments.lookup_ks, arguments.max_new_tokens)
        if arguments.json is not None:
            check_writable_file(arguments.json, "--json")
    except (KeyError, ValueError, InputError) as error:
        parser.error(str(error.args[0]))
    check_pair(pair.main.path, pair.draft.path)
    tuning = tune_tasks(pair, splits, points, device=arguments.device, repeats=arguments.repeats,
                        held_out_repeats=arguments.held_out_repeats, margin=arguments.margin)
    argv = sys.argv[1:] if argv is None else list(argv)
    print(text_table(choice_rows(tuning.choices)))
    print(summary_line(tuning.choices))
    print("Run: python -m maintainers.tuner " + " ".join(argv))
    if arguments.json is not None:
        write_tuning_json(arguments.json, tuning, argv)
        print(f"written to {arguments.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
