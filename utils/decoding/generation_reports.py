"""Read measured records: summaries per mode, text tables, what each model's passes cost, where outputs part.

    compared = compare_with_plain(records)        # utils.decoding.generation
    show_table(summarise(compared))               # speed-up, acceptance, tokens per pass per (backend, mode, setting)
    show_table(speculation_breakdown(compared))   # draft and main time per pass, c, per-token acceptance
    pair = first_divergent_pair(compared)         # the first record that differs from plain, if any
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from utils.decoding import decoding_metrics
from utils.decoding.generation import GenerationRecord
from utils.text_compare import first_divergence


def summarise(records: Sequence[GenerationRecord]) -> list[dict]:
    """One row per (mode, setting): totals over prompts and the speed-up over comparable prompts only.

    The speed-up is total plain time / total time over the prompts whose token
    counts matched plain (None if there are none). acceptance_rate and
    tokens_per_pass pool all prompts (`utils.decoding.decoding_metrics`). Needs compared records.
    """
    groups: dict[tuple[str, str, str], list[GenerationRecord]] = {}
    for record in records:
        groups.setdefault((record.stack, record.mode, record.setting), []).append(record)
    rows = []
    for (stack, mode, setting), group in groups.items():
        comparable = [record for record in group if record.speedup_vs_plain is not None]
        plain_time = sum(record.wall_seconds * record.speedup_vs_plain for record in group
                         if record.speedup_vs_plain is not None)
        this_time = sum(record.wall_seconds for record in comparable)
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
            "tokens_per_second": tokens / sum(record.wall_seconds for record in group),
            "comparable_prompts": len(comparable),
            "speedup_vs_plain": plain_time / this_time if comparable and this_time > 0 else None,
            "identical_prompts": sum(bool(record.identical_to_plain) for record in group),
            "acceptance_rate": decoding_metrics.acceptance_rate(
                sum(accepted for accepted, _ in counted), sum(drafted for _, drafted in counted))
            if counted else None,
            "tokens_per_pass": decoding_metrics.pooled_tokens_per_main_pass(runs) if len(runs) == len(group) else None,
        })
    return rows


def format_table(records: Sequence[GenerationRecord]) -> str:
    """A fixed-width text table of records: mode, setting, task, prompt, time, tokens, tokens/s, speed-up, ...

    Records from more than one stack (OpenVINO GenAI and transformers) get a leading "stack" column.
    """
    with_stack = len({record.stack for record in records}) > 1
    header = (("stack",) if with_stack else ()) + (
        "mode", "setting", "task", "prompt", "seconds", "tokens", "tokens/s", "speed-up", "acceptance rate", "tokens per main pass", "identical")
    rows = [header]
    for record in records:
        rows.append((record.stack,) * with_stack + (
            record.mode,
            record.setting,
            record.task,
            record.prompt_id,
            f"{record.wall_seconds:.3f}",
            str(record.generated_tokens),
            f"{record.tokens_per_second:.1f}",
            f"{record.speedup_vs_plain:.2f}x" if record.speedup_vs_plain is not None else "-",
            f"{record.acceptance_rate:.2f}" if record.acceptance_rate is not None else "-",
            f"{record.tokens_per_pass:.2f}" if record.tokens_per_pass is not None else "-",
            "-" if record.identical_to_plain is None else ("yes" if record.identical_to_plain else
                                                           f"no (@{record.first_difference})"),
        ))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def repeat_speedups(plain: Sequence[GenerationRecord], candidates: Sequence[GenerationRecord]) -> list[float]:
    """The speed-up of a group of candidate runs over plain decoding: one sample per repeat of an interleaved run.

    Repeat i's sample is total plain time / total candidate time over the group's prompts in repeat i (the runs are
    interleaved, so repeat i of both ran side by side). A candidate counts only where plain ran the same prompt on
    the same stack and the token counts matched (`speedup_vs_plain` set, as in `compare_with_plain`). Empty
    without repeat times.
    """
    by_prompt = {(record.stack, record.prompt_id): record for record in plain}
    pairs = [(by_prompt[(record.stack, record.prompt_id)], record) for record in candidates
             if record.speedup_vs_plain is not None and (record.stack, record.prompt_id) in by_prompt]
    repeats = min((len(run.wall_seconds_all) for pair in pairs for run in pair), default=0)
    return [sum(base.wall_seconds_all[i] for base, _ in pairs) / sum(other.wall_seconds_all[i] for _, other in pairs)
            for i in range(repeats)]


def repeats_direction(slowest: float, fastest: float) -> str:
    """"faster" if every repeat beat plain decoding, "slower" if every repeat lost to it, "unclear" if the repeats
    fall on both sides of 1.00x (however far the median is from it)."""
    if slowest > 1.0:
        return "faster"
    if fastest < 1.0:
        return "slower"
    return "unclear"


def speedup_by_task(records: Sequence[GenerationRecord]) -> list[dict]:
    """Per (setting, task) of a compared, repeated measurement: the speed-up's median and its spread over repeats.

    The samples are `repeat_speedups` of the task's prompts; the median and the min-max of those samples are shown,
    with the tokens per main pass (pooled) and how many outputs equal plain.
    """
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
    """One sentence per setting from `speedup_by_task` rows: where it was faster or slower than plain in every
    repeat, and where the repeats disagree (`repeats_direction`)."""
    sentences = []
    for setting in dict.fromkeys(row["setting"] for row in rows):
        by_direction: dict[str, list[str]] = {"faster": [], "slower": [], "unclear": []}
        for row in (row for row in rows if row["setting"] == setting and row["speed-up (median)"] is not None):
            text = f"{row['task']} {row['speed-up (median)']:.2f}x ({row['slowest repeat']:.2f}x-{row['fastest repeat']:.2f}x)"
            by_direction[repeats_direction(row["slowest repeat"], row["fastest repeat"])].append(text)
        faster, slower, unclear = by_direction["faster"], by_direction["slower"], by_direction["unclear"]
        parts = [f"faster than plain in every repeat on {', '.join(faster)}" if faster else "",
                 f"slower in every repeat on {', '.join(slower)}" if slower else "",
                 f"no clear verdict (the repeats straddle 1.00x) on {', '.join(unclear)}" if unclear else ""]
        sentences.append(f"{setting}: " + "; ".join(part for part in parts if part) + ".")
    return "In this run, " + " ".join(sentences)


def speculation_breakdown(records: Sequence[GenerationRecord]) -> list[dict]:
    """Per speculative record: passes, acceptance, per-pass costs of draft and main, and Leviathan's prediction.

    cost ratio c = draft time per pass / main time per verification pass (from GenAI's
    per-model inference durations of this run, the prefill left out:
    `utils.decoding.decoding_metrics.verification_pass_ms`, `draft_step_ms`, `cost_ratio`).
    With a fixed K, the per-token acceptance `a` that explains the measured
    tokens per main pass is recovered, and `predicted_speedup(a, K, c)` is shown
    next to the measured speed-up; the formula assumes a verification pass
    costs as much as a plain step.
    """
    from utils.decoding.speedup_model import predicted_speedup

    rows = []
    for record in records:
        if record.main_model_metrics is None or record.draft_model_metrics is None or not record.main_passes:
            continue
        main_ms = decoding_metrics.verification_pass_ms(record.main_model_metrics)
        draft_ms = decoding_metrics.draft_step_ms(record.draft_model_metrics)
        if main_ms is None or draft_ms is None:
            continue
        cost_ratio = decoding_metrics.cost_ratio(draft_ms, main_ms) if main_ms > 0 else None
        k = record.num_assistant_tokens
        predicted = per_token_acceptance = None
        if k and cost_ratio is not None and record.tokens_per_pass is not None:
            per_token_acceptance = decoding_metrics.per_token_acceptance(record.tokens_per_pass, k)
            predicted = predicted_speedup(per_token_acceptance, k, cost_ratio)
        rows.append({
            "prompt": record.prompt_id,
            "setting": record.setting,
            "tokens": record.generated_tokens,
            "main passes": record.main_passes,
            "draft passes": record.draft_model_metrics["passes"],
            "drafted": record.draft_tokens,
            "accepted": record.accepted_tokens,
            "acceptance rate": record.acceptance_rate,
            "main ms/pass": main_ms,
            "draft ms/pass": draft_ms,
            "cost ratio c": cost_ratio,
            "per-token acceptance a": per_token_acceptance,
            "predicted speed-up": predicted,
            "measured speed-up": record.speedup_vs_plain,
        })
    return rows


def _plain_step_ms(records: Sequence[GenerationRecord]) -> dict[str, float]:
    """Per prompt, the OpenVINO GenAI plain run's time per output token (the formula's plain step)."""
    return {record.prompt_id: record.tpot_ms for record in records
            if record.mode == "plain" and record.stack == "openvino_genai" and record.tpot_ms}


def verification_gap(records: Sequence[GenerationRecord]) -> list[dict]:
    """Per speculative record: why the measured speed-up differs from Leviathan's prediction.

    The formula takes one main pass (K+1 tokens) to cost one plain step. Here the plain step is the plain run's
    time per token on the same prompt (`tpot_ms`), the main pass and the draft step are the speculative run's
    per-pass means (the prefill left out, as in `speculation_breakdown`). "predicted (step times)" puts the three
    measured times into `predicted_speedup_with_step_times`; "verify / plain" is
    `decoding_metrics.verification_cost` (1.0 = the wider pass is free).
    """
    from utils.decoding.speedup_model import predicted_speedup_with_step_times

    plain_ms = _plain_step_ms(records)
    rows = []
    for record in records:
        breakdown = speculation_breakdown([record])  # empty unless the record carries both models' metrics
        plain_step = plain_ms.get(record.prompt_id)
        # "per-token acceptance a" is only filled in for records with a fixed K: the last test changes nothing
        if (not breakdown or plain_step is None or breakdown[0]["per-token acceptance a"] is None
                or not record.num_assistant_tokens):
            continue
        row, k = breakdown[0], record.num_assistant_tokens
        acceptance = row["per-token acceptance a"]
        rows.append({
            "prompt": row["prompt"], "setting": row["setting"], "plain ms/token": plain_step,
            "main ms/pass": row["main ms/pass"], "verify / plain": decoding_metrics.verification_cost(
                row["main ms/pass"], plain_step),
            "predicted (Leviathan)": row["predicted speed-up"],
            "predicted (step times)": predicted_speedup_with_step_times(
                acceptance, k, row["draft ms/pass"], plain_step, row["main ms/pass"]),
            "measured speed-up": row["measured speed-up"],
        })
    return rows


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


def formula_by_task(records: Sequence[GenerationRecord], target_speedup: float = 1.5) -> list[dict]:
    """Per (setting, task) of speculative runs with a fixed K: the measured speed-up beside the formula's.

    The per-record figures of `verification_gap` pooled over a task's prompts: tokens per main pass pooled
    (`decoding_metrics.pooled_tokens_per_main_pass`), the acceptance a that explains it, the median draft step,
    verification pass and plain step, c = draft step / verification pass (as in `speculation_breakdown`),
    Leviathan's prediction from a and c, the prediction from the three step times, the same with a draft that
    costs nothing (the ceiling the verification pass leaves, whatever draft is found), the measured speed-up
    (total plain time / total speculative time over prompts with as many tokens as plain) and its ratio to each
    prediction (both runs' prefill is in the measurement, not in the predictions), and the draft's budget: its
    step over a plain step ("draft / plain") beside the dearest draft step that would reach `target_speedup` at
    this acceptance and verification cost (`speedup_model.draft_step_budget`; None: not even a free draft would).
    Needs compared
    records carrying GenAI's per-model metrics; threshold runs (no fixed K) are left out.
    """
    import statistics

    from utils.decoding.speedup_model import draft_step_budget, predicted_speedup, predicted_speedup_with_step_times

    plain_ms = _plain_step_ms(records)
    groups: dict[tuple[str, str], list[tuple[GenerationRecord, dict]]] = {}
    for record in records:
        breakdown = speculation_breakdown([record]) if record.num_assistant_tokens else []
        if breakdown and record.prompt_id in plain_ms and record.mode == "speculative":
            groups.setdefault((record.setting, record.task), []).append((record, breakdown[0]))
    rows = []
    for (setting, task), group in groups.items():
        k = group[0][0].num_assistant_tokens
        assert k, "only records with a fixed K are grouped"
        tokens_per_pass = decoding_metrics.pooled_tokens_per_main_pass(
            [record.tokens_per_step for record, _ in group if record.tokens_per_step])
        if tokens_per_pass is None:
            continue
        acceptance = decoding_metrics.per_token_acceptance(tokens_per_pass, k)
        draft_ms = statistics.median(row["draft ms/pass"] for _, row in group)
        verify_ms = statistics.median(row["main ms/pass"] for _, row in group)
        plain_step = statistics.median(plain_ms[record.prompt_id] for record, _ in group)
        comparable = [record for record, _ in group if record.speedup_vs_plain is not None]
        spec_time = sum(record.wall_seconds for record in comparable)
        measured = (sum(record.wall_seconds * record.speedup_vs_plain for record, _ in group
                        if record.speedup_vs_plain is not None) / spec_time
                    if comparable and spec_time > 0 else None)
        cost_ratio = decoding_metrics.cost_ratio(draft_ms, verify_ms)
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
            "draft / plain": draft_ms / plain_step,
            f"draft / plain for {target_speedup:g}x": None if budget is None else budget / plain_step,
        })
    return rows
