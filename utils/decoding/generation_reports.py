"""Read compared records (`compare_with_plain`): summaries per setting, text tables, what each model's passes cost
(`speculation_breakdown`, `formula_by_task`) and where outputs part from plain.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from utils.decoding import decoding_metrics
from utils.decoding.generation import GenerationRecord
from utils.text_compare import first_divergence


def summarise(records: Sequence[GenerationRecord]) -> list[dict]:
    """One row per (stack, mode, setting): pooled totals, and the speed-up over comparable prompts only.

    The speed-up is the median of `repeat_speedups` (without repeat times, the ratio of the median runs' totals).
    """
    import statistics

    plain = [record for record in records if record.mode == "plain"]
    groups: dict[tuple[str, str, str], list[GenerationRecord]] = {}
    for record in records:
        groups.setdefault((record.stack, record.mode, record.setting), []).append(record)
    rows = []
    for (stack, mode, setting), group in groups.items():
        comparable = [record for record in group if record.speedup_vs_plain is not None]
        plain_time = sum(record.plain_wall_seconds or 0.0 for record in comparable)
        this_time = sum(record.wall_seconds for record in comparable)
        samples = repeat_speedups(plain, group)
        counted = [(record.accepted_tokens, record.draft_tokens) for record in group  # GenAI's counters, when sane
                   if record.accepted_tokens is not None and record.draft_tokens is not None
                   and 0 <= record.accepted_tokens <= record.draft_tokens]
        tokens = sum(record.generated_tokens for record in group)
        runs = [record.tokens_per_step for record in group if record.tokens_per_step]
        rows.append({
            "stack": stack,
            "mode": mode,
            "setting": setting,
            "prompts": len(group),
            "generated_tokens": tokens,
            "wall_seconds": sum(record.wall_seconds for record in group),
            "tokens_per_second": tokens / seconds if (seconds := sum(record.wall_seconds for record in group)) > 0
            else None,
            "comparable_prompts": len(comparable),
            "speedup_vs_plain": (statistics.median(samples) if samples else plain_time / this_time)
            if comparable and this_time > 0 else None,
            "identical_prompts": sum(bool(record.identical_to_plain) for record in group),
            "acceptance_rate": decoding_metrics.acceptance_rate(
                sum(accepted for accepted, _ in counted), sum(drafted for _, drafted in counted))
            if counted else None,
            "tokens_per_pass": decoding_metrics.pooled_tokens_per_main_pass(runs) if len(runs) == len(group) else None,
        })
    return rows


def format_table(records: Sequence[GenerationRecord]) -> str:
    """Records as a text table; a "stack" column is added when they come from more than one stack."""
    from utils.tables import text_table

    with_stack = len({record.stack for record in records}) > 1

    def number(value: float | None, pattern: str) -> str:
        return "-" if value is None else pattern.format(value)

    return text_table([{
        **({"stack": record.stack} if with_stack else {}),
        "mode": record.mode, "setting": record.setting, "task": record.task, "prompt": record.prompt_id,
        "seconds": f"{record.wall_seconds:.3f}", "tokens": str(record.generated_tokens),
        "tokens/s": f"{record.tokens_per_second:.1f}", "speed-up": number(record.speedup_vs_plain, "{:.2f}x"),
        "acceptance rate": number(record.acceptance_rate, "{:.2f}"),
        "tokens per main pass": number(record.tokens_per_pass, "{:.2f}"),
        "identical": "-" if record.identical_to_plain is None else (
            "yes" if record.identical_to_plain else f"no (@{record.first_difference})"),
    } for record in records])


def repeat_speedups(plain: Sequence[GenerationRecord], candidates: Sequence[GenerationRecord]) -> list[float]:
    """Candidates' speed-up over plain per repeat, over those with `speedup_vs_plain` set; empty without repeats."""
    by_prompt: dict[tuple[str, str], GenerationRecord] = {}
    for record in plain:  # the first plain run of a prompt, as in `compare_with_plain`
        by_prompt.setdefault((record.stack, record.prompt_id), record)
    pairs = [(by_prompt[(record.stack, record.prompt_id)], record) for record in candidates
             if record.speedup_vs_plain is not None and (record.stack, record.prompt_id) in by_prompt]
    return decoding_metrics.speedup_per_repeat([base.wall_seconds_all for base, _ in pairs],
                                               [other.wall_seconds_all for _, other in pairs])


def speedup_by_task(records: Sequence[GenerationRecord]) -> list[dict]:
    """Per (setting, task): median and min-max of `repeat_speedups`, pooled tokens per pass, outputs equal to plain."""
    import statistics

    plain = [record for record in records if record.mode == "plain"]
    groups: dict[tuple[str, str], list[GenerationRecord]] = {}
    for record in records:
        if record.mode != "plain":
            groups.setdefault((record.setting, record.task), []).append(record)
    rows = []
    for (setting, task), group in groups.items():
        samples = repeat_speedups(plain, group)
        runs = [record.tokens_per_step for record in group if record.tokens_per_step]
        rows.append({
            "setting": setting, "task": task, "prompts": len(group), "repeats": len(samples),
            "speed-up (median)": statistics.median(samples) if samples else None,
            "slowest repeat": min(samples) if samples else None,
            "fastest repeat": max(samples) if samples else None,
            "tokens per main pass": decoding_metrics.pooled_tokens_per_main_pass(runs) if runs else None,
            "identical to plain": f"{sum(bool(record.identical_to_plain) for record in group)}/{len(group)}",
        })
    return rows


def speedup_verdict(rows: Sequence[dict]) -> str:
    """One sentence per setting from `speedup_by_task` rows: each task's `verdict` with its median and range."""
    sentences = []
    for setting in dict.fromkeys(row["setting"] for row in rows):
        by_verdict: dict[str, list[str]] = {}
        for row in (row for row in rows if row["setting"] == setting and row["speed-up (median)"] is not None):
            spread = [row["slowest repeat"], row["fastest repeat"]]
            text = f"{row['task']} {row['speed-up (median)']:.2f}x [{spread[0]:.2f}x-{spread[1]:.2f}x]"
            by_verdict.setdefault(decoding_metrics.verdict(spread), []).append(text)
        parts = [f"{word} than plain in every repeat on {', '.join(by_verdict[word])}"
                 for word in (decoding_metrics.FASTER, decoding_metrics.SLOWER) if word in by_verdict]
        if decoding_metrics.NO_CLEAR_DIFFERENCE in by_verdict:
            parts.append(f"no clear difference (the repeats straddle 1.00x) on "
                         f"{', '.join(by_verdict[decoding_metrics.NO_CLEAR_DIFFERENCE])}")
        sentences.append(f"{setting}: " + ("; ".join(parts) or "no comparable prompt (token counts differ)") + ".")
    return "In this run, " + " ".join(sentences) if sentences else "No speculative run to judge in these rows."


def _plain_step_ms(records: Sequence[GenerationRecord]) -> dict[str, float]:
    """Per prompt, the OpenVINO GenAI plain run's TPOT (one plain main step)."""
    return {record.prompt_id: record.tpot_ms for record in records
            if record.mode == "plain" and record.stack == "openvino_genai" and record.tpot_ms}


def speculation_breakdown(records: Sequence[GenerationRecord]) -> list[dict]:
    """Per speculative record: passes, acceptance, the three step times, c, V(K) and both predictions.

    The plain step is the plain run's TPOT on the same prompt (plain records must be in `records`). "predicted
    (Leviathan)" prices a verification pass at one plain step, "predicted (step times)" charges V(K).
    """
    from utils.decoding.speedup_model import predicted_speedup, predicted_speedup_with_step_times

    plain_ms = _plain_step_ms(records)
    rows = []
    for record in records:
        if record.main_model_metrics is None or record.draft_model_metrics is None or not record.main_passes:
            continue
        verify_ms = decoding_metrics.verification_pass_ms(record.main_model_metrics)
        draft_ms = decoding_metrics.draft_step_ms(record.draft_model_metrics)
        plain_step = plain_ms.get(record.prompt_id)
        if verify_ms is None or draft_ms is None:
            continue
        cost_ratio = decoding_metrics.cost_ratio(draft_ms, plain_step) if plain_step else None
        k = record.num_assistant_tokens
        acceptance = leviathan = with_step_times = None
        if k and record.tokens_per_pass is not None:
            acceptance = decoding_metrics.per_token_acceptance(record.tokens_per_pass, k)
            if cost_ratio is not None and plain_step and verify_ms > 0:
                leviathan = predicted_speedup(acceptance, k, cost_ratio)
                with_step_times = predicted_speedup_with_step_times(acceptance, k, draft_ms, plain_step, verify_ms)
        rows.append({
            "prompt": record.prompt_id, "setting": record.setting, "tokens": record.generated_tokens,
            "main passes": record.main_passes, "draft passes": record.draft_model_metrics["passes"],
            "drafted": record.draft_tokens, "accepted": record.accepted_tokens,
            "acceptance rate": record.acceptance_rate,
            "plain ms/token": plain_step, "main ms/pass": verify_ms, "draft ms/pass": draft_ms,
            "cost ratio c": cost_ratio,
            "verify / plain": decoding_metrics.verification_cost(verify_ms, plain_step) if plain_step else None,
            "per-token acceptance a": acceptance,
            "predicted (Leviathan)": leviathan, "predicted (step times)": with_step_times,
            "measured speed-up": record.speedup_vs_plain,
        })
    return rows


def verification_gap(records: Sequence[GenerationRecord]) -> list[dict]:
    """`speculation_breakdown`'s columns that show why the measurement departs from Leviathan's formula (fixed K)."""
    columns = ("prompt", "setting", "plain ms/token", "main ms/pass", "verify / plain", "predicted (Leviathan)",
               "predicted (step times)", "measured speed-up")
    return [{column: row[column] for column in columns} for row in speculation_breakdown(records)
            if row["predicted (step times)"] is not None]


def first_divergent_pair(records: Sequence[GenerationRecord]) -> tuple[GenerationRecord, GenerationRecord] | None:
    """(plain record, other record) for the first compared record that differs from plain, or None."""
    for record in records:
        if record.mode != "plain" and record.identical_to_plain is False:
            for plain in records:
                if plain.mode == "plain" and plain.prompt_id == record.prompt_id and plain.stack == record.stack:
                    return plain, record
    return None


def describe_divergence(plain: GenerationRecord, other: GenerationRecord, tokenizer: Any, context_tokens: int = 12
                        ) -> str:
    """Text around the first token where `other` leaves `plain`: the shared lead-in, then both continuations."""
    position = first_divergence(plain.token_ids, other.token_ids)
    if position is None:
        return f"{other.mode} ({other.setting}) is identical to plain on {plain.prompt_id}."

    def text(ids: Sequence[int]) -> str:
        return tokenizer.decode(list(ids), skip_special_tokens=True)

    start = max(0, position - context_tokens)
    shared = text(plain.token_ids[start:position])
    return (f"{plain.prompt_id}: first difference at generated token {position}\n"
            f"  shared   ...{shared!r}\n"
            f"  plain        -> {text(plain.token_ids[position:position + context_tokens])!r}\n"
            f"  {other.mode:<12} -> {text(other.token_ids[position:position + context_tokens])!r}")


def divergence_margin(main: Any, prompt_ids: Sequence[int], generated_ids: Sequence[int], position: int,
                      device: str = "CPU") -> float:
    """How near a tie the exact main model was where two outputs part: its top-1 minus top-2 logit there.

    main: the main model's OpenVINO folder or a model compiled with exact f32 (`compile_stateful_model`). A margin
    near 0 means a (K+1)-token pass and a one-token step, whose f32 sums round differently, may pick other tokens.
    """
    import numpy as np

    from utils.decoding.step_timing import compile_stateful_model

    compiled = main if hasattr(main, "create_infer_request") else compile_stateful_model(main, device, "f32")
    if hasattr(prompt_ids, "input_ids"):  # OpenVINO GenAI's TokenizedInputs
        prompt_ids = prompt_ids.input_ids.data[0].tolist()
    ids = [int(token) for token in (*prompt_ids, *generated_ids[:position])]
    request = compiled.create_infer_request()
    request.infer({"input_ids": np.asarray([ids], dtype=np.int64),
                   "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
                   "position_ids": np.arange(len(ids), dtype=np.int64)[None, :],
                   "beam_idx": np.zeros((1,), dtype=np.int32)})
    second, first = np.partition(request.get_tensor("logits").data[0, -1].astype(np.float64), -2)[-2:]
    return float(first - second)


def formula_by_task(records: Sequence[GenerationRecord], target_speedup: float = 1.5) -> list[dict]:
    """Per (setting, task) of fixed-K runs: `speculation_breakdown` pooled, measured speed-up beside predictions.

    Adds the prediction with a free draft (the ceiling V(K) leaves) and the dearest c that reaches `target_speedup`.
    """
    import statistics

    from utils.decoding.speedup_model import draft_step_budget, predicted_speedup, predicted_speedup_with_step_times

    rows_by_prompt = {(row["prompt"], row["setting"]): row for row in speculation_breakdown(records)}
    plain = [record for record in records if record.mode == "plain"]
    groups: dict[tuple[str, str], list[tuple[GenerationRecord, dict]]] = {}
    for record in records:
        row = rows_by_prompt.get((record.prompt_id, record.setting))
        if record.mode == "speculative" and record.num_assistant_tokens and row and row["cost ratio c"] is not None:
            groups.setdefault((record.setting, record.task), []).append((record, row))
    rows = []
    for (setting, task), group in groups.items():
        k = group[0][0].num_assistant_tokens
        assert k, "only records with a fixed K are grouped"
        tokens_per_pass = decoding_metrics.pooled_tokens_per_main_pass(
            [record.tokens_per_step for record, _ in group if record.tokens_per_step])
        if tokens_per_pass is None:
            continue
        acceptance = decoding_metrics.per_token_acceptance(tokens_per_pass, k)
        draft_ms, verify_ms, plain_step = (statistics.median(row[column] for _, row in group)
                                           for column in ("draft ms/pass", "main ms/pass", "plain ms/token"))
        samples = repeat_speedups(plain, [record for record, _ in group])
        comparable = [record for record, _ in group if record.speedup_vs_plain is not None]
        spec_time = sum(record.wall_seconds for record in comparable)
        plain_time = sum(record.plain_wall_seconds or 0.0 for record in comparable)
        measured = (statistics.median(samples) if samples else plain_time / spec_time
                    if comparable and spec_time > 0 else None)
        cost_ratio = decoding_metrics.cost_ratio(draft_ms, plain_step)
        leviathan = predicted_speedup(acceptance, k, cost_ratio)
        step_times = predicted_speedup_with_step_times(acceptance, k, draft_ms, plain_step, verify_ms)
        budget = draft_step_budget(acceptance, k, plain_step, verify_ms, target_speedup)
        rows.append({
            "setting": setting, "task": task, "prompts": len(group),
            "identical": f"{sum(bool(record.identical_to_plain) for record, _ in group)}/{len(group)}",
            "tokens per main pass": tokens_per_pass, "per-token acceptance a": acceptance,
            "cost ratio c": cost_ratio,
            "verify / plain": decoding_metrics.verification_cost(verify_ms, plain_step),
            "measured speed-up": measured, "predicted (Leviathan)": leviathan,
            "predicted (step times)": step_times,
            "predicted, free draft": predicted_speedup_with_step_times(acceptance, k, 0.0, plain_step, verify_ms),
            "measured / Leviathan": measured / leviathan if measured is not None else None,
            "measured / step times": measured / step_times if measured is not None else None,
            "draft / plain": cost_ratio,
            f"draft / plain for {target_speedup:g}x": None if budget is None else budget / plain_step,
        })
    return rows
