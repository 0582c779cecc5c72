"""Self-speculation with OpenVINO GenAI: a model's own int4/int8 exports draft for its fp16 export.

The OpenVINO half of notebook 04. The IPEX-LLM kernel has no OpenVINO, so the
notebook runs this module with the main environment's python and reads the
JSON it writes::

    python -m utils.selfspec.ov_self_speculation --prompts build/self_spec/prompts.json \\
        --json build/self_spec/openvino.json --main models/smollm2-135m-instruct-fp16-ov \\
        --draft int4=models/smollm2-135m-instruct-int4-ov --draft int8=models/smollm2-135m-instruct-int8-ov \\
        --max-new-tokens 40 --repeats 3 --num-assistant-tokens 3 --precision f32 --threads 1

The prompts file (written by the IPEX-LLM side) lists ``id``, ``task``, ``text``
and the ``input_ids`` the IPEX-LLM tokenizer produced; this side checks that
OpenVINO's tokenizer gives the same ids, so both halves decode the same input.
Each generation goes through `utils.decoding.generation.run_prompt`; runs are warmed up,
interleaved and summarised by medians, and `utils.decoding.generation.compare_with_plain`
reports a speed-up only for equal token counts. Every run is timed by wall clock
and by this process's CPU time, which other programs on a shared machine do
not inflate. Each model is also timed decoding alone to get the cost ratio c.

Only `run` and the CLI import openvino_genai; the rest is plain Python.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PROMPTS_SCHEMA_KEYS = ("id", "task", "text", "input_ids")


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
        missing = [key for key in PROMPTS_SCHEMA_KEYS if key not in prompt]
        if missing:
            raise ValueError(f"Prompt {index} in {path} lacks {', '.join(missing)}.")
        if not prompt["input_ids"] or not all(isinstance(token, int) for token in prompt["input_ids"]):
            raise ValueError(f"Prompt {prompt['id']!r} in {path}: input_ids must be a non-empty list of ints.")
    return prompts


def cost_ratios(main_ms_per_token: float, draft_ms_per_token: dict[str, float]) -> dict[str, float]:
    """c for each draft: its plain time per token over the main model's (`utils.decoding.decoding_metrics.cost_ratio`)."""
    from utils.decoding.decoding_metrics import cost_ratio

    return {name: cost_ratio(value, main_ms_per_token) for name, value in draft_ms_per_token.items()}


def summary_rows(results: dict) -> list[dict]:
    """One row per (draft, prompt) from this module's JSON, in the notebook's side-by-side format.

    "tokens/pass" is `utils.decoding.decoding_metrics.tokens_per_main_pass` (the prefill pass left out).
    """
    from utils.decoding.decoding_metrics import tokens_per_main_pass

    rows = []
    for record in results["records"]:
        if record["mode"] != "speculative":
            continue
        draft = record["draft"]
        steps = record.get("tokens_per_step")
        rows.append({
            "backend": "OpenVINO GenAI",
            "draft": f"{draft} copy",
            "setting": record["setting"],
            "prompt": record["prompt_id"],
            "prompt tokens": record["input_tokens"],
            "tokens": record["generated_tokens"],
            "speed-up": record["speedup_vs_plain"],
            "speed-up (CPU time)": record.get("speedup_cpu"),
            "acceptance": record["acceptance_rate"],
            "k": results["settings"]["num_assistant_tokens"],
            "tokens/pass": tokens_per_main_pass(steps) if steps else None,
            "identical to plain": record["identical_to_plain"],
            "first difference": record["first_difference"],
            "cost ratio c": results["cost_ratio"].get(draft),
            "precision": record["precision"],
        })
    return rows


def pipeline_step_costs(results: dict) -> list[dict]:
    """Inside each speculative run: a verify pass and a draft pass, relative to one plain decode step.

    From OpenVINO GenAI's per-model metrics of the speculative run (wall times of
    that run): `decoding_metrics.verification_pass_ms` (the prefill left out) and
    `decoding_metrics.draft_step_ms`. Both are
    divided by the plain run's time per output token on the same prompt.
    Leviathan's formula assumes 1 and c for these two (`utils.decoding.decoding_metrics`).
    """
    from utils.decoding.decoding_metrics import cost_ratio, draft_step_ms, verification_cost, verification_pass_ms

    plain = {record["prompt_id"]: record for record in results["records"] if record["mode"] == "plain"}
    rows = []
    for record in results["records"]:
        main, draft = record.get("main_model_metrics"), record.get("draft_model_metrics")
        reference = plain.get(record["prompt_id"], {}).get("tpot_ms")
        if record["mode"] != "speculative" or not main or not draft or not reference or main["passes"] < 2:
            continue
        verify_ms, draft_ms = verification_pass_ms(main), draft_step_ms(draft)
        if verify_ms is None or draft_ms is None:  # as in generation_reports.speculation_breakdown
            continue
        rows.append({
            "backend": "OpenVINO GenAI",
            "draft": f"{record['draft']} copy",
            "prompt": record["prompt_id"],
            "verify pass / plain step": verification_cost(verify_ms, reference),
            "draft pass / plain step": cost_ratio(draft_ms, reference),
            "c (draft alone)": results["cost_ratio"].get(record["draft"]),
            "draft passes / verify pass": draft["passes"] / (main["passes"] - 1),
        })
    return rows


def median_timed_run(runs: Sequence[tuple[Any, float]]) -> tuple[Any, float]:
    """(record, CPU seconds) pairs of repeated runs -> (`utils.decoding.generation.median_of_runs` of the records, median CPU)."""
    from utils.decoding.generation import median_of_runs

    if not runs:
        raise ValueError("No runs to summarise.")
    return median_of_runs([record for record, _ in runs]), statistics.median(cpu for _, cpu in runs)


def cpu_speedup(plain: dict, candidate: dict) -> float | None:
    """Per-token speed-up from CPU seconds (None if either run generated nothing)."""
    if not plain["generated_tokens"] or not candidate["generated_tokens"] or not candidate["cpu_seconds"]:
        return None
    return (plain["cpu_seconds"] / plain["generated_tokens"]) / (candidate["cpu_seconds"] / candidate["generated_tokens"])


def run(prompts_file: Path, output: Path, main_dir: Path, drafts: dict[str, Path], *, max_new_tokens: int,
        repeats: int, num_assistant_tokens: int, precision: str, threads: int, device: str = "CPU",
        cost_steps: int = 16) -> dict:
    """Measure plain vs self-speculative decoding for every draft; write and return the results.

    Every (prompt, pipeline) run is timed by wall clock and by this process's CPU
    time. Runs are interleaved (each repeat goes through every prompt and
    pipeline) after one warm-up per pipeline. The cost ratio c of each draft is
    its plain decode step over the main model's, in CPU time.
    """
    from utils.decoding.generation import DecodingSettings, compare_with_plain, encode_prompt, run_prompt
    from utils.decoding.pipelines import LoadedPipeline, check_draft_folder, check_main_folder, load_pipeline
    from utils.decoding.prompts import LONG_PROMPT_MIN_TOKENS, Prompt

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}.")
    shared = read_prompts(prompts_file)
    main_dir = check_main_folder(main_dir)
    drafts = {name: check_draft_folder(folder, main_dir) for name, folder in drafts.items()}

    def loaded(mode: str, main: Path, draft: Path | None) -> LoadedPipeline:
        return load_pipeline(mode, main, device, draft_dir=draft, precision=precision,
                             threads=threads if threads > 0 else None)

    def timed(pipeline: LoadedPipeline, prompt: Prompt, settings: DecodingSettings) -> tuple[Any, float]:
        started = time.process_time()
        record = run_prompt(pipeline, prompt, settings)
        return record, time.process_time() - started

    prompts = [Prompt(item["id"], item["task"], item["text"],
                      "long" if len(item["input_ids"]) >= LONG_PROMPT_MIN_TOKENS else "short") for item in shared]
    plain = loaded("plain", main_dir, None)
    same_input = {item["id"]: encode_prompt(plain.tokenizer, item["text"]).input_ids.data[0].tolist()
                  == item["input_ids"] for item in shared}
    plain_settings = DecodingSettings("plain", max_new_tokens=max_new_tokens)
    spec_settings = DecodingSettings("speculative", num_assistant_tokens=num_assistant_tokens,
                                     max_new_tokens=max_new_tokens)
    candidates = [(None, plain, plain_settings)] + [(name, loaded("speculative", main_dir, folder), spec_settings)
                                                    for name, folder in drafts.items()]
    for _, pipeline, settings in candidates:
        run_prompt(pipeline, prompts[0], settings)  # warm-up
    runs: dict[tuple[int, int], list[tuple[Any, float]]] = {}
    for _ in range(repeats):
        for prompt_index, prompt in enumerate(prompts):
            for candidate_index, (_, pipeline, settings) in enumerate(candidates):
                runs.setdefault((candidate_index, prompt_index), []).append(timed(pipeline, prompt, settings))
    medians = {key: median_timed_run(value) for key, value in runs.items()}
    keys = [(c, p) for c in range(len(candidates)) for p in range(len(prompts))]
    compared = compare_with_plain([medians[key][0] for key in keys])
    records = [{**record.as_dict(), "draft": candidates[c][0], "cpu_seconds": medians[(c, p)][1]}
               for record, (c, p) in zip(compared, keys, strict=True)]
    plain_by_prompt = {record["prompt_id"]: record for record in records if record["mode"] == "plain"}
    for record in records:
        record["speedup_cpu"] = cpu_speedup(plain_by_prompt[record["prompt_id"]], record)

    # Cost of one decode step of each model alone (CPU time): (1 + steps tokens) - (1 token), per step.
    def step_ms(pipeline: LoadedPipeline) -> float:
        long_run = DecodingSettings("plain", max_new_tokens=1 + cost_steps, ignore_eos=True)
        one = DecodingSettings("plain", max_new_tokens=1, ignore_eos=True)
        timed(pipeline, prompts[0], long_run)  # warm-up
        samples = [(timed(pipeline, prompts[0], long_run)[1] - timed(pipeline, prompts[0], one)[1]) / cost_steps
                   for _ in range(repeats)]
        return 1000 * statistics.median(samples)

    main_ms = step_ms(plain)
    draft_ms = {name: step_ms(loaded("plain", folder, None)) for name, folder in drafts.items()}
    results = {
        "settings": {"device": device, "precision": precision, "threads": threads, "max_new_tokens": max_new_tokens,
                     "repeats": repeats, "num_assistant_tokens": num_assistant_tokens, "main": main_dir.name,
                     "drafts": {name: folder.name for name, folder in drafts.items()}},
        "versions": {package: importlib.metadata.version(package) for package in ("openvino", "openvino-genai")},
        "same_input_ids": same_input,
        "main_step_cpu_ms": main_ms,
        "draft_step_cpu_ms": draft_ms,
        "cost_ratio": cost_ratios(main_ms, draft_ms),
        "records": records,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", required=True, type=Path, help="JSON list of {id, task, text, input_ids}")
    parser.add_argument("--json", required=True, type=Path, help="where to write the results")
    parser.add_argument("--main", required=True, type=Path, help="the fp16 OpenVINO folder")
    parser.add_argument("--draft", action="append", default=[], help="NAME=FOLDER, repeatable")
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-assistant-tokens", type=int, default=3)
    parser.add_argument("--precision", default="f32", choices=("f32", "default"))
    parser.add_argument("--threads", type=int, default=1, help="INFERENCE_NUM_THREADS; 0 = OpenVINO's choice")
    parser.add_argument("--device", default="CPU")
    arguments = parser.parse_args(argv)
    results = run(arguments.prompts, arguments.json, arguments.main, parse_drafts(arguments.draft),
                  max_new_tokens=arguments.max_new_tokens, repeats=arguments.repeats,
                  num_assistant_tokens=arguments.num_assistant_tokens, precision=arguments.precision,
                  threads=arguments.threads, device=arguments.device)
    for row in summary_rows(results):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
