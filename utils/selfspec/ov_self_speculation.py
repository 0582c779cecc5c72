"""Self-speculation with OpenVINO GenAI: a model's own int4/int8 exports draft for its fp16 export.

The OpenVINO half of notebook 04, run with the main environment's python (the IPEX-LLM kernel has no OpenVINO); it
checks that OpenVINO's tokenizer gives the prompts file's ``input_ids`` (from the IPEX-LLM side) and writes JSON.
openvino is imported lazily (by `utils.decoding`), so the IPEX-LLM kernel can read the JSON with `openvino_summary_rows`.
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from utils.decoding import decoding_metrics as metrics
from utils.decoding import generation
from utils.decoding.exactness import partings
from utils.decoding.generation_reports import repeat_speedups
from utils.decoding.measurement import interleaved_runs
from utils.decoding.pipelines import check_draft_folder, check_main_folder, load_pipeline
from utils.decoding.prompts import LONG_PROMPT_MIN_TOKENS, Prompt
from utils.result_files import write_json


def parse_drafts(values: Sequence[str]) -> dict[str, Path]:
    """``["int4=/path", ...]`` -> ``{"int4": Path("/path")}``; names must be unique."""
    drafts: dict[str, Path] = {}
    for value in values:
        name, separator, folder = value.partition("=")
        if not separator or not name or not folder:
            raise ValueError(f"--draft expects NAME=FOLDER (e.g. int4=models/x-int4-ov), got {value!r}.")
        if name in drafts:
            raise ValueError(f"Draft name {name!r} given twice.")
        drafts[name] = Path(folder)
    if not drafts:
        raise ValueError("Give at least one --draft NAME=FOLDER.")
    return drafts


def read_prompts(path: Path | str) -> list[dict]:
    """The shared prompts file, validated: a list of {id, task, text, input_ids}."""
    prompts = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(prompts, list) or not prompts:
        raise ValueError(f"{path} must hold a non-empty JSON list of prompts.")
    for index, prompt in enumerate(prompts):
        missing = [key for key in ("id", "task", "text", "input_ids") if key not in prompt]
        if missing:
            raise ValueError(f"Prompt {index} in {path} lacks {', '.join(missing)}.")
        if not prompt["input_ids"] or not all(isinstance(token, int) for token in prompt["input_ids"]):
            raise ValueError(f"Prompt {prompt['id']!r} in {path}: input_ids must be a non-empty list of ints.")
    return prompts


def openvino_summary_rows(results: dict) -> list[dict]:
    """One row per (draft, prompt) from `run`'s JSON, in `ipex_comparisons.summary_rows`' format; c and the verify
    cost are relative to the plain run's TPOT on the same prompt."""
    plain = {record["prompt_id"]: record for record in results["records"] if record["mode"] == "plain"}
    rows = []
    for record in results["records"]:
        if record["mode"] != "speculative":
            continue
        reference = plain[record["prompt_id"]]
        samples = ([base / other for base, other in zip(reference["wall_seconds_all"], record["wall_seconds_all"],
                                                         strict=True)]
                   if record["generated_tokens"] == reference["generated_tokens"] else [])
        main, draft = record.get("main_model_metrics") or {}, record.get("draft_model_metrics") or {}
        verify_ms = metrics.verification_pass_ms(main) if main.get("passes", 0) >= 2 else None
        draft_ms = metrics.draft_step_ms(draft) if draft else None
        step_ms = reference["tpot_ms"]
        steps = record.get("tokens_per_step")
        rows.append({
            "backend": "OpenVINO GenAI", "draft": f"{record['draft']} copy", "setting": record["setting"],
            "prompt": record["prompt_id"], "tokens": record["generated_tokens"],
            "speed-up (median)": statistics.median(samples) if samples else None,
            "speed-up": metrics.speedup_text(samples),
            "acceptance": record["acceptance_rate"], "k": results["settings"]["num_assistant_tokens"],
            "tokens/pass": metrics.tokens_per_main_pass(steps) if steps else None,
            "identical to plain": record["identical_to_plain"], "first difference": record["first_difference"],
            "plain step ms": step_ms,
            "cost ratio c": metrics.cost_ratio(draft_ms, step_ms) if draft_ms is not None and step_ms else None,
            "verify pass / plain step": metrics.verification_cost(verify_ms, step_ms) if verify_ms and step_ms else None,
            "precision": record["precision"],
        })
    return rows


def run(prompts_file: Path, output: Path, main_dir: Path, drafts: dict[str, Path], *, max_new_tokens: int,
        repeats: int, num_assistant_tokens: int, precision: str, threads: int) -> dict:
    """Measure plain vs self-speculative decoding on CPU for every draft (`interleaved_runs`); write and return the
    results. Under f32, "partings" lists outputs that part from plain, where, and the main's logit margin there."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}.")
    shared = read_prompts(prompts_file)
    main_dir = check_main_folder(main_dir)
    drafts = {name: check_draft_folder(folder, main_dir) for name, folder in drafts.items()}
    prompts = [Prompt(item["id"], item["task"], item["text"],
                      "long" if len(item["input_ids"]) >= LONG_PROMPT_MIN_TOKENS else "short") for item in shared]
    load = partial(load_pipeline, main_dir=main_dir, device="CPU", precision=precision, threads=threads or None)
    pipelines = [load("plain"), *(load("speculative", draft_dir=folder) for folder in drafts.values())]
    settings = [generation.DecodingSettings("plain", max_new_tokens=max_new_tokens), *[generation.DecodingSettings(
        "speculative", num_assistant_tokens=num_assistant_tokens, max_new_tokens=max_new_tokens)] * len(drafts)]
    runners = [partial(generation.run_prompt, pipeline, settings=setting)
               for pipeline, setting in zip(pipelines, settings, strict=True)]
    names: list[str | None] = [None, *drafts]  # None: plain decoding
    same_input = {item["id"]: generation.encode_prompt(pipelines[0].tokenizer, item["text"]).input_ids.data[0].tolist()
                  == item["input_ids"] for item in shared}
    measured = interleaved_runs(runners, prompts, warmup=1, repeats=repeats, desc="OpenVINO self-speculation")
    compared = generation.compare_with_plain([generation.median_of_runs([run.result for run in cell.runs])
                                              for row in measured for cell in row])
    records = [compared[index * len(prompts):(index + 1) * len(prompts)] for index in range(len(runners))]

    def cpu_speedups(index: int) -> list[float]:
        """`repeat_speedups` by this process's CPU time: the same prompts, their CPU seconds per repeat."""
        kept = [p for p, record in enumerate(records[index]) if record.speedup_vs_plain is not None]
        plain, other = ([[run.cpu_seconds for run in measured[i][p].runs] for p in kept] for i in (0, index))
        return metrics.speedup_per_repeat(plain, other)

    texts = {item["id"]: item["text"] for item in shared}
    results = {
        "settings": {"precision": precision, "threads": threads, "max_new_tokens": max_new_tokens, "repeats": repeats,
                     "num_assistant_tokens": num_assistant_tokens, "main": main_dir.name,
                     "drafts": {name: folder.name for name, folder in drafts.items()}},
        "same_input_ids": same_input,
        "speedups": {name: {"wall": repeat_speedups(records[0], records[index]), "cpu": cpu_speedups(index)}
                     for index, name in enumerate(names) if name is not None},
        "partings": [{"draft": name, "line": parting.line()} for index, name in enumerate(names)
                     if name is not None and precision == "f32"
                     for parting in partings(records[0] + records[index], main_dir, "CPU", texts)],
        "records": [{**record.as_dict(), "draft": name} for name, row in zip(names, records, strict=True)
                    for record in row],
    }
    write_json(output, results)
    return results


def command_line(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", dest="prompts_file", required=True, type=Path,
                        help="JSON list of {id, task, text, input_ids}")
    parser.add_argument("--json", dest="output", required=True, type=Path, help="where to write the results")
    parser.add_argument("--main", dest="main_dir", required=True, type=Path, help="the fp16 OpenVINO folder")
    parser.add_argument("--draft", dest="drafts", action="append", default=[], help="NAME=FOLDER, repeatable")
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-assistant-tokens", type=int, default=3)
    parser.add_argument("--precision", default="f32", choices=("f32", "default"))
    parser.add_argument("--threads", type=int, default=1, help="INFERENCE_NUM_THREADS; 0 = OpenVINO's choice")
    arguments = vars(parser.parse_args(argv))
    run(**{**arguments, "drafts": parse_drafts(arguments["drafts"])})

if __name__ == "__main__":
    command_line()
