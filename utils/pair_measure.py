"""Measure a pair's cost ratio c, acceptance, tokens per main pass and speed-up per task and K, beside
Leviathan's prediction, in one process:

    python -m utils.pair_measure --pair qwen2.5-coder --drafts int4 int4-all-layers -k 2 3 4 --json out.json

Every pipeline (plain main, each draft run alone, speculative per draft) is loaded once; all runs are
interleaved prompt by prompt after a warm-up, and medians are kept (utils.generation.measure_side_by_side).
c = the draft's time per output token / the main's (both plain, same prompts, same precision);
a = the per-token acceptance that explains the measured tokens per main pass (Leviathan et al.);
predicted = (1 - a^(K+1)) / ((1 - a)(K c + 1)).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Sequence
from pathlib import Path

from utils import decoding_metrics
from utils.speedup_model import predicted_speedup


def cost_ratio(main_plain: Sequence, draft_plain: Sequence) -> float:
    """Median over prompts of c (`decoding_metrics.cost_ratio`) from each model's plain time per output token."""
    ratios = [decoding_metrics.cost_ratio(d.tpot_ms, m.tpot_ms)
              for m, d in zip(main_plain, draft_plain) if m.tpot_ms and d.tpot_ms]
    if not ratios:
        raise ValueError("No time-per-token figures to compute the cost ratio from.")
    return statistics.median(ratios)


def task_rows(records: Sequence, main_plain: Sequence, c: float, draft_name: str, task_of: dict[str, str]) -> list[dict]:
    """One row per (task, K): measured speed-up (ratio of summed medians), acceptance, prediction."""
    plain_by_prompt = {record.prompt_id: record for record in main_plain}
    groups: dict[tuple[str, int], list] = {}
    for record in records:
        groups.setdefault((task_of[record.prompt_id], record.num_assistant_tokens), []).append(record)
    rows = []
    for (task, k), group in sorted(groups.items()):
        plain_wall = sum(plain_by_prompt[r.prompt_id].wall_seconds for r in group)
        spec_wall = sum(r.wall_seconds for r in group)
        tokens = sum(r.generated_tokens for r in group)
        passes = sum(r.main_passes or 0 for r in group)
        tokens_per_pass = tokens / passes if passes else float("nan")
        acceptance = decoding_metrics.per_token_acceptance(tokens_per_pass, k) if passes else float("nan")
        rows.append({
            "draft": draft_name, "task": task, "K": k, "prompts": len(group),
            # lossless only if the kept run equals plain and every repeat of both gave the same tokens
            "identical": f"{sum(bool(r.identical_to_plain) and r.outputs_stable and plain_by_prompt[r.prompt_id].outputs_stable for r in group)}/{len(group)}",
            "c": round(c, 3), "GenAI acceptance": round(statistics.mean(
                r.acceptance_rate for r in group if r.acceptance_rate is not None), 2)
            if any(r.acceptance_rate is not None for r in group) else None,
            "a (from tok/pass)": round(acceptance, 2), "tok/pass": round(tokens_per_pass, 2),
            "speed-up": round(plain_wall / spec_wall, 2),
            "predicted": round(predicted_speedup(acceptance, k, c), 2),
        })
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    from utils.generation import DecodingSettings, compare_with_plain, measure_side_by_side
    from utils.pipelines import load_pipeline
    from utils.model_catalogue import get_pair
    from utils.prompts import select_prompts
    from utils.tables import text_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="qwen2.5-coder")
    parser.add_argument("--drafts", nargs="+", default=None, help="draft variants (default: the pair's default)")
    parser.add_argument("--draft-dir", type=Path, nargs="*", default=[], help="extra draft folders")
    parser.add_argument("-k", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--precision", default="f32", choices=["f32", "default"])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--per-task", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", default=None, help="task types (default: every task in utils.prompts)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    arguments = parser.parse_args(argv)

    pair = get_pair(arguments.pair)
    drafts = {name: pair.draft_variant(name).path for name in (arguments.drafts or [None])}
    drafts |= {folder.name: folder for folder in arguments.draft_dir}
    prompts = select_prompts(tasks=arguments.tasks, per_task=arguments.per_task)
    task_of = {prompt.id: prompt.task for prompt in prompts}
    common = {"max_new_tokens": arguments.max_new_tokens}
    plain_settings = DecodingSettings("plain", **common)
    candidates = [(load_pipeline("plain", pair.main.path, precision=arguments.precision), plain_settings)]
    for folder in drafts.values():
        candidates.append((load_pipeline("plain", folder, precision=arguments.precision), plain_settings))
    for folder in drafts.values():
        speculative = load_pipeline("speculative", pair.main.path, draft_dir=folder, precision=arguments.precision)
        candidates += [(speculative, DecodingSettings("speculative", num_assistant_tokens=k, **common))
                       for k in arguments.k]
    load_before = os.getloadavg()
    records = measure_side_by_side(candidates, prompts, warmup=arguments.warmup, repeats=arguments.repeats,
                                   progress=lambda message: print("  " + message, flush=True))
    count = len(prompts)
    blocks = [records[i * count:(i + 1) * count] for i in range(len(candidates))]
    main_plain = blocks[0]
    rows = []
    for index, name in enumerate(drafts):
        c = cost_ratio(main_plain, blocks[1 + index])
        start = 1 + len(drafts) + index * len(arguments.k)
        speculative_records = [r for block in blocks[start:start + len(arguments.k)] for r in block]
        compared = [r for r in compare_with_plain(main_plain + speculative_records) if r.mode == "speculative"]
        rows += task_rows(compared, main_plain, c, name, task_of)
    print(text_table(rows))
    timing = {"main ms/token (median)": statistics.median(r.tpot_ms for r in main_plain)}
    for index, name in enumerate(drafts):
        timing[f"{name} ms/token (median)"] = statistics.median(r.tpot_ms for r in blocks[1 + index])
    print({key: round(value, 1) for key, value in timing.items()})
    print(f"load average before {load_before}, after {os.getloadavg()} (shared machine: timings are noisy)")
    if arguments.json:
        arguments.json.parent.mkdir(parents=True, exist_ok=True)
        arguments.json.write_text(json.dumps({"rows": rows, "timing": timing, "load_before": load_before,
                                              "load_after": os.getloadavg(),
                                              "records": [r.as_dict() for r in records]}, indent=1))


if __name__ == "__main__":
    main()
