"""Benchmark plain, speculative and prompt-lookup decoding on one model pair: `python -m maintainers.benchmark`.

    python -m maintainers.benchmark                                  # offline pair, int4 draft, K=3, default precision
    python -m maintainers.benchmark --draft int8 --precision f32 -k 2 4
    python -m maintainers.benchmark --threshold 0.3 0.6 --tasks code chat --json build/bench.json
    python -m maintainers.benchmark --main-dir models/x-ov --draft-dir models/y-ov   # any two folders
    python -m maintainers.benchmark --pair qwen2.5-coder --precision f32 --draft-precision bf16   # exact main, fast draft
    python -m maintainers.benchmark --pair qwen2.5-coder --precision f32 --fast-main   # the main's fast path kept
    python -m maintainers.benchmark --pair qwen2.5-coder --precision f32 --draft default eagle3-quick   # two drafts

It uses the same functions as notebooks 02 and 03 (`utils.decoding.generation`), so the
figures agree: every pipeline runs on OpenVINO GenAI's continuous-batching
backend, warm-up first, repeats interleaved, medians kept, and a speed-up is
printed only when a run generated as many tokens as plain decoding did.
`identical` says whether the token ids equal plain decoding's (expect "yes"
under --precision f32 with greedy decoding). For speculative runs with a fixed
K it also prints, per task, the measured speed-up beside Leviathan's prediction
from the measured acceptance and cost ratio c, and beside the prediction from
the measured step times (`utils.decoding.generation_reports.formula_by_task`), then the
best lossless setting of each task type and over all prompts. Several `--draft`
variants (or `--draft-dir` folders) are measured in the same interleaved run, each
row named after its draft; for the Qwen2.5-Coder pair, `eagle3-quick`,
`eagle3-chunks`, `eagle3-reference` and `eagle3-more-answers` name the EAGLE-3 heads
`python -m maintainers.eagle3_coder` builds (checked for `eagle3_mode` and for the main's widths and tokenizer). `--draft-precision` runs
the draft at another inference precision than the main model: only the main
model decides the output, so a bf16 draft keeps an f32 run lossless and only
changes how often, and how cheaply, the draft is right. `--precision f32` also
makes the main model exact (no dynamic quantisation, an f32 KV cache), which
costs speed in both modes; `--fast-main` keeps its fast path, and then
"identical" is what the run measured, not a property of the arithmetic.

It is a benchmark, not a test: numbers depend on the machine and on whatever
else runs on it. Every setting is checked before any model is loaded.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from maintainers.run_context import check_writable_file, measurement_context
from utils.decoding import decoding_metrics
from utils.decoding.generation import (
    DecodingSettings,
    GenerationRecord,
    compare_with_plain,
    encode_prompt,
    measure_side_by_side,
)
from utils.decoding.generation_reports import format_table, formula_by_task, summarise
from utils.decoding.pipelines import (
    INFERENCE_PRECISIONS,
    PRECISIONS,
    SpeculationSetupError,
    check_draft_folder,
    check_main_folder,
    check_single_thread_precision,
    load_pipeline,
)
from utils.decoding.prompts import LENGTHS, TASKS, Prompt, select_prompts
from utils.input_checks import (
    InputError,
    as_integer,
    check_device,
    check_prompt_fits,
    context_length,
)
from utils.result_files import write_json

MODES_ORDER = ("plain", "speculative", "prompt_lookup")
LOOKUP_DEFAULT = 3  # --lookup-k and --ngram
# maintainers.eagle3_coder's presets
HEAD_VARIANTS = ("eagle3-quick", "eagle3-chunks", "eagle3-reference", "eagle3-more-answers")
RNG_SEED_MAX = 2**64 - 1  # GenerationConfig.rng_seed is a size_t: 0 .. 2**64-1 (a negative seed is a pybind TypeError)


@dataclass
class BenchmarkPlan:
    """Everything a benchmark run needs, validated: folders, settings per mode, prompts, timing options."""

    main_dir: Path
    drafts: dict[str, Path]  # label -> draft folder, in the order given; empty without speculative decoding
    device: str
    precision: str
    settings: list[DecodingSettings]
    prompts: list[Prompt]
    warmup: int
    repeats: int
    threads: int | None
    draft_precision: str | None = None  # None: the main model's precision
    target_speedup: float = 1.5  # what the formula table budgets the draft step for
    exact_main: bool = True  # with precision f32: the main model without dynamic quantisation (--fast-main keeps it)
    description: dict = field(default_factory=dict)
    draft_of: dict[str, str] = field(default_factory=dict)  # with several drafts: setting label -> draft label

    @property
    def draft_dir(self) -> Path | None:
        """The first draft's folder (None without speculative decoding)."""
        return next(iter(self.drafts.values()), None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m maintainers.benchmark",
        description="Plain vs speculative vs prompt-lookup decoding with OpenVINO GenAI, measured honestly "
                    "(same backend and precision, warm-up, interleaved repeats, medians, speed-up only for "
                    "equal token counts).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    models = parser.add_argument_group("models")
    models.add_argument("--pair", default="offline", help="model pair from utils.models.model_catalogue")
    models.add_argument("--draft", nargs="+", default=None, metavar="VARIANT",
                        help="draft variants of the pair, measured side by side ('default', or e.g. int8 and fp16 "
                             f"for the offline pair; {' and '.join(HEAD_VARIANTS)} for the qwen2.5-coder pair: the "
                             "EAGLE-3 heads python -m maintainers.eagle3_coder builds)")
    models.add_argument("--main-dir", type=Path, default=None, help="main model folder (overrides --pair)")
    models.add_argument("--draft-dir", type=Path, nargs="+", default=None, metavar="DIR",
                        help="draft model folders, measured side by side (override --pair/--draft)")
    models.add_argument("--device", default="CPU")
    models.add_argument("--precision", choices=PRECISIONS, default="default",
                        help="f32 sets INFERENCE_PRECISION_HINT=f32 on main and draft; default keeps the device's "
                             "choice (bf16 on CPUs with AVX512_BF16/AMX)")
    models.add_argument("--draft-precision", choices=INFERENCE_PRECISIONS, default=None,
                        help="the draft's inference precision (default: the same as --precision); the output "
                             "depends on the main model only, so a bf16 draft keeps an f32 run exact")
    models.add_argument("--fast-main", action="store_true",
                        help="with --precision f32, keep the main model's fast path (dynamic int8 quantisation of "
                             "activations; the KV cache stays f32): faster on CPUs with VNNI/AMX, but a pass over K+1 "
                             "tokens may then round differently from a plain step; the 'identical' column says "
                             "whether it did")
    models.add_argument("--threads", type=int, default=None, help="CPU inference threads (default: all cores)")
    decoding = parser.add_argument_group("decoding")
    decoding.add_argument("--modes", nargs="+", choices=MODES_ORDER, default=list(MODES_ORDER))
    decoding.add_argument("-k", "--num-assistant-tokens", type=int, nargs="+", default=None, metavar="K",
                          help="draft tokens per step for speculative decoding (several values: one run each; "
                               "default 3 unless --threshold is given)")
    decoding.add_argument("--threshold", type=float, nargs="+", default=None, metavar="T",
                          help="assistant_confidence_threshold for dynamic speculation (instead of -k)")
    decoding.add_argument("--lookup-k", type=int, default=None,
                          help=f"candidate tokens per step for prompt lookup (default {LOOKUP_DEFAULT})")
    decoding.add_argument("--ngram", type=int, default=None,
                          help=f"max_ngram_size for prompt lookup (default {LOOKUP_DEFAULT})")
    decoding.add_argument("--max-new-tokens", type=int, default=64)
    decoding.add_argument("--sample", action="store_true", help="do_sample=True (outputs are then not comparable "
                                                                "token for token; speed-ups need equal counts)")
    decoding.add_argument("--seed", type=int, default=42,
                          help=f"rng_seed when sampling (an integer from 0 to {RNG_SEED_MAX})")
    prompts = parser.add_argument_group("prompts and timing")
    prompts.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    prompts.add_argument("--length", choices=LENGTHS, default=None, help="only short or only long prompts")
    prompts.add_argument("--per-task", type=int, default=None, help="at most this many prompts per task")
    prompts.add_argument("--warmup", type=int, default=1, help="untimed runs per pipeline before timing")
    prompts.add_argument("--repeats", type=int, default=3, help="timed runs per prompt; the median is kept")
    parser.add_argument("--target-speedup", type=float, default=1.5, metavar="X",
                        help="the formula table's 'draft / plain for Xx': the dearest draft step (over a plain step) "
                             "that would reach this speed-up at the measured acceptance and verification cost")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the records here")
    return parser


def _speculative_settings(arguments: argparse.Namespace) -> list[DecodingSettings]:
    common = {"max_new_tokens": arguments.max_new_tokens, "do_sample": arguments.sample,
              "rng_seed": arguments.seed}
    if arguments.num_assistant_tokens is not None and arguments.threshold is not None:
        # Let DecodingSettings word the error, as it would in a notebook.
        DecodingSettings("speculative", num_assistant_tokens=arguments.num_assistant_tokens[0],
                         assistant_confidence_threshold=arguments.threshold[0], **common)
    if arguments.threshold is not None:
        return [DecodingSettings("speculative", assistant_confidence_threshold=value, **common)
                for value in arguments.threshold]
    values = arguments.num_assistant_tokens or [None]
    return [DecodingSettings("speculative", num_assistant_tokens=value, **common) for value in values]


def _refuse_ignored_options(arguments: argparse.Namespace) -> None:
    """A speculation option for a mode that does not run would be silently ignored: refuse it."""
    ignored = {"speculative": [("-k", arguments.num_assistant_tokens), ("--threshold", arguments.threshold),
                               ("--draft-precision", arguments.draft_precision)],
               "prompt_lookup": [("--lookup-k", arguments.lookup_k), ("--ngram", arguments.ngram)]}
    for mode, options in ignored.items():
        given = [option for option, value in options if value is not None]
        if given and mode not in arguments.modes:
            raise SpeculationSetupError(f"{' and '.join(given)} only apply to {mode} decoding, which --modes "
                                        f"{' '.join(arguments.modes)} leaves out: add {mode} to --modes or drop "
                                        f"{' and '.join(given)}.")


def coder_head_folder(variant: str) -> Path:
    """The exported EAGLE-3 head `python -m maintainers.eagle3_coder --preset P` builds for `--draft eagle3-P`."""
    from maintainers.eagle3_coder import CoderHeadSettings, coder_main
    from utils.training.eagle3_settings import eagle3_folders

    preset = variant.removeprefix("eagle3-")
    folder = eagle3_folders(CoderHeadSettings.preset(preset), coder_main()).exported
    if not (folder / "openvino_model.xml").is_file():
        raise SpeculationSetupError(f"The {variant} head is not built ({folder} is missing): build it with "
                                    f"`python -m maintainers.eagle3_coder --preset {preset}`.")
    return folder


def is_eagle3_head(folder: Path) -> bool:
    """True if the folder's config.json names an EAGLE-3 head architecture."""
    import json

    config = Path(folder) / "config.json"
    if not config.is_file():
        return False
    architectures = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    return any("eagle3" in str(name).lower() for name in architectures)


def check_drafts(folders: dict[str, Path], main_dir: Path) -> dict[str, Path]:
    """Each draft checked against the main (an EAGLE-3 head also for `eagle3_mode`, widths and tokenizer)."""
    from utils.training.eagle3_checks import check_exported_head

    checked = {}
    for label, folder in folders.items():
        if is_eagle3_head(folder):
            check_exported_head(Path(folder), main_dir)
        checked[label] = check_draft_folder(folder, main_dir)
    return checked


def plan_benchmark(arguments: argparse.Namespace) -> BenchmarkPlan:
    """Turn parsed arguments into a checked plan; raises ValueError (with what to do) before loading models."""
    as_integer(arguments.seed, "--seed", minimum=0, maximum=RNG_SEED_MAX,
               advice="OpenVINO GenAI's rng_seed is an unsigned 64-bit integer.")
    common = {"max_new_tokens": arguments.max_new_tokens, "do_sample": arguments.sample,
              "rng_seed": arguments.seed}
    settings: list[DecodingSettings] = []
    if "plain" not in arguments.modes:
        raise SpeculationSetupError("--modes must include plain: every speed-up is measured against it.")
    settings.append(DecodingSettings("plain", **common))
    if "speculative" in arguments.modes:
        settings.extend(_speculative_settings(arguments))
    if "prompt_lookup" in arguments.modes:
        settings.append(DecodingSettings(
            "prompt_lookup", num_assistant_tokens=LOOKUP_DEFAULT if arguments.lookup_k is None else arguments.lookup_k,
            max_ngram_size=LOOKUP_DEFAULT if arguments.ngram is None else arguments.ngram, **common))
    _refuse_ignored_options(arguments)
    if arguments.repeats < 1 or arguments.warmup < 0:
        raise SpeculationSetupError(f"Need --repeats >= 1 and --warmup >= 0, got {arguments.repeats} and "
                                    f"{arguments.warmup}.")
    if arguments.threads is not None:
        as_integer(arguments.threads, "--threads", minimum=1, advice="Leave it out to use all cores.")
    if arguments.fast_main and arguments.precision != "f32":
        raise ValueError("--fast-main only changes an f32 main model (without --precision f32 the device's fast "
                         "path is on anyway): add --precision f32.")
    if not arguments.target_speedup > 0:
        raise ValueError(f"--target-speedup must be > 0 (a speed-up over plain decoding), "
                         f"got {arguments.target_speedup}.")
    if arguments.json is not None:
        check_writable_file(arguments.json, "--json")
    device = check_device(arguments.device, name="--device")
    prompts = select_prompts(arguments.tasks, arguments.length, arguments.per_task)
    for precision in (arguments.precision, arguments.draft_precision):
        if precision is not None:
            check_single_thread_precision(device, None, precision, arguments.threads)

    variants = list(dict.fromkeys(arguments.draft or ["default"]))
    description = {"pair": arguments.pair, "draft_variants": variants}
    drafts: dict[str, Path] = {}
    if arguments.main_dir is not None:
        main_dir = arguments.main_dir
        description["pair"] = None
    else:
        from utils.models.model_catalogue import get_pair

        try:
            pair = get_pair(arguments.pair)
            for variant in variants:
                if variant not in HEAD_VARIANTS:
                    drafts[variant] = pair.draft_variant(None if variant == "default" else variant).path
                elif pair.name != "qwen2.5-coder":
                    raise KeyError(f"--draft {variant} is a head for the qwen2.5-coder pair's main, not for "
                                   f"'{pair.name}': add --pair qwen2.5-coder.")
        except KeyError as error:
            raise SpeculationSetupError(error.args[0]) from None
        main_dir = pair.main.path
    main_dir = check_main_folder(main_dir)
    check_prompt_fits(0, arguments.max_new_tokens, context_length(main_dir), main_dir.name)
    if "speculative" not in arguments.modes:
        drafts = {}
    elif arguments.draft_dir is not None:
        drafts = {folder.name: folder for folder in dict.fromkeys(arguments.draft_dir)}
    elif arguments.main_dir is not None:
        raise SpeculationSetupError("With --main-dir, give --draft-dir too (or leave speculative out of --modes).")
    else:  # in the order given; a head's folder is looked up once the main is known to be there
        drafts = {variant: coder_head_folder(variant) if variant in HEAD_VARIANTS else drafts[variant]
                  for variant in variants}
    drafts = check_drafts(drafts, main_dir)
    draft_of: dict[str, str] = {}
    if len(drafts) > 1:  # one row per draft and setting, named after the draft
        named: list[DecodingSettings] = []
        for item in settings:
            if item.mode != "speculative":
                named.append(item)
                continue
            for label in drafts:
                named.append(replace(item, name=f"{label} {item.label}"))
                draft_of[named[-1].label] = label
        settings = named
    return BenchmarkPlan(main_dir=main_dir, drafts=drafts, device=device,
                         precision=arguments.precision, draft_precision=arguments.draft_precision,
                         settings=settings, prompts=prompts,
                         warmup=arguments.warmup, repeats=arguments.repeats, threads=arguments.threads,
                         target_speedup=arguments.target_speedup, exact_main=not arguments.fast_main,
                         description=description, draft_of=draft_of)


def run_benchmark(plan: BenchmarkPlan, progress=None) -> list[GenerationRecord]:
    """Load one pipeline per mode, measure every setting side by side, and compare with plain."""
    pipelines = {}
    for settings in plan.settings:
        key = _pipeline_key(plan, settings)
        if key not in pipelines:
            speculative = settings.mode == "speculative"
            pipelines[key] = load_pipeline(settings.mode, plan.main_dir, plan.device, precision=plan.precision,
                                           draft_dir=plan.drafts[key[1]] if speculative else None,
                                           draft_precision=plan.draft_precision if speculative else None,
                                           threads=plan.threads, exact_main=plan.exact_main)
    check_prompts_fit(plan, next(iter(pipelines.values())).tokenizer)
    candidates = [(pipelines[_pipeline_key(plan, settings)], settings) for settings in plan.settings]
    records = measure_side_by_side(candidates, plan.prompts, warmup=plan.warmup, repeats=plan.repeats,
                                   progress=progress, show_progress=False)
    return compare_with_plain(records)


def _pipeline_key(plan: BenchmarkPlan, settings: DecodingSettings) -> tuple[str, str]:
    """(mode, draft label): one pipeline per mode, and per draft for speculative settings."""
    if settings.mode != "speculative":
        return settings.mode, ""
    if len(plan.drafts) == 1:
        return settings.mode, next(iter(plan.drafts))
    return settings.mode, plan.draft_of[settings.label]


def check_prompts_fit(plan: BenchmarkPlan, tokenizer) -> None:
    """Every prompt plus max_new_tokens fits the main model's context (raises before any measuring)."""
    context = context_length(plan.main_dir)
    for settings in plan.settings:
        for prompt in plan.prompts:
            length = int(encode_prompt(tokenizer, prompt.text, settings.apply_chat_template).input_ids.get_shape()[-1])
            check_prompt_fits(length, settings.max_new_tokens, context, f"{plan.main_dir.name} (prompt {prompt.id})")


def summary_table(records: Sequence[GenerationRecord]) -> str:
    """The per-(mode, setting) totals as a text table."""
    from utils.tables import text_table

    rows = []
    for row in summarise(records):
        rows.append({
            "mode": row["mode"], "setting": row["setting"], "prompts": row["prompts"],
            "tokens": row["generated_tokens"], "time s": round(row["wall_seconds"], 3),
            "tok/s": round(row["tokens_per_second"], 1),
            "speed-up (comparable)": "-" if row["speedup_vs_plain"] is None else
            f"{row['speedup_vs_plain']:.2f}x over {row['comparable_prompts']}",
            "identical": f"{row['identical_prompts']}/{row['prompts']}",
            "acceptance": "-" if row["acceptance_rate"] is None else round(row["acceptance_rate"], 2),
            "tokens per main pass": "-" if row["tokens_per_pass"] is None else round(row["tokens_per_pass"], 2),
        })
    return text_table(rows)


def formula_table(records: Sequence[GenerationRecord], target_speedup: float = 1.5) -> str | None:
    """`formula_by_task` as a text table (None without speculative runs at a fixed K)."""
    from utils.tables import text_table

    rows = formula_by_task(records, target_speedup)
    if not rows:
        return None
    return text_table([{key: round(value, 2) if isinstance(value, float) else ("-" if value is None else value)
                        for key, value in row.items()} for row in rows])


def best_lossless(summary_rows: Sequence[dict]) -> dict | None:
    """The fastest non-plain (mode, setting) of `summarise` rows whose every prompt matched plain, token for token.

    A setting counts only if all its prompts were comparable (same token count) and identical to plain decoding
    (`utils.decoding.decoding_metrics.fastest_lossless`); None if no setting qualifies.
    """
    return decoding_metrics.fastest_lossless([row for row in summary_rows if row["mode"] != "plain"],
                                             "speedup_vs_plain")


def best_lossless_by_task(records: Sequence[GenerationRecord]) -> dict[str, dict | None]:
    """Per task type (in the order the records have them), `best_lossless` over that task's prompts alone."""
    tasks = dict.fromkeys(record.task for record in records)
    return {task: best_lossless(summarise([record for record in records if record.task == task])) for task in tasks}


def best_by_task_line(records: Sequence[GenerationRecord]) -> str:
    """One line: the best lossless setting of each task type; below 1.00x, that task is best left to plain decoding."""
    parts = []
    for task, best in best_lossless_by_task(records).items():
        parts.append(f"{task}: none" if best is None else
                     f"{task}: {best['mode']} {best['setting']}, {best['speedup_vs_plain']:.2f}x ({best['prompts']} "
                     f"prompt{'s' if best['prompts'] != 1 else ''})")
    return "best lossless per task: " + "; ".join(parts)


def best_lossless_line(records: Sequence[GenerationRecord], argv: Sequence[str]) -> str:
    """One line: the best lossless setting of this run, its speed-up, and the command that reproduces the run."""
    best = best_lossless(summarise(records))
    command = "python -m maintainers.benchmark " + " ".join(argv)
    if best is None:
        return f"best lossless configuration: none (no setting matched plain on every prompt). Run: {command}"
    return (f"best lossless configuration: {best['mode']} {best['setting']}, {best['speedup_vs_plain']:.2f}x over "
            f"plain ({best['prompts']} prompts, every output identical to plain). Run: {command}")


def write_benchmark_json(path: Path, plan: BenchmarkPlan, records: Sequence[GenerationRecord]) -> None:
    """The records, their summary, the plan and the machine, as JSON."""
    document = {
        "machine": measurement_context(),
        "plan": {
            "main_dir": str(plan.main_dir), "draft_dir": str(plan.draft_dir) if plan.draft_dir else None,
            "drafts": {label: str(folder) for label, folder in plan.drafts.items()},
            "device": plan.device, "precision": plan.precision, "draft_precision": plan.draft_precision,
            "exact_main": plan.exact_main, "warmup": plan.warmup, "repeats": plan.repeats,
            "target_speedup": plan.target_speedup,
            "threads": plan.threads, "settings": [settings.label for settings in plan.settings],
            "prompts": [prompt.id for prompt in plan.prompts], **plan.description,
        },
        "records": [record.as_dict() for record in records],
        "summary": summarise(records),
        "formula": formula_by_task(records, plan.target_speedup),
        "best_by_task": best_lossless_by_task(records),
    }
    write_json(path, document)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        plan = plan_benchmark(arguments)
    except (ValueError, KeyError) as error:
        parser.error(str(error))
    draft = f", draft{'s' if len(plan.drafts) > 1 else ''} " + ", ".join(folder.name for folder in plan.drafts.values()) \
        if plan.drafts else ""
    if plan.draft_dir and plan.draft_precision is not None:
        draft += f" at {plan.draft_precision}"
    main_path = " (fast path: dynamic quantisation kept)" if plan.precision == "f32" and not plan.exact_main else ""
    print(f"main {plan.main_dir.name}{draft} on {plan.device}, precision {plan.precision}{main_path}; "
          f"{len(plan.prompts)} prompts x {len(plan.settings)} settings, warm-up {plan.warmup}, "
          f"repeats {plan.repeats}, max_new_tokens {arguments.max_new_tokens}", flush=True)
    try:
        records = run_benchmark(plan, progress=lambda message: print("  " + message, file=sys.stderr, flush=True))
    except (SpeculationSetupError, InputError) as error:  # a prompt that does not fit, found before measuring
        parser.error(str(error))
    print(format_table(records))
    print()
    print(summary_table(records))
    formula = formula_table(records, plan.target_speedup)
    if formula is not None:
        print("\nThe formula beside the measurement, per task (utils.decoding.generation_reports.formula_by_task): a from the "
              "tokens per main pass, c = draft step / plain main step, 'verify / plain' = what checking K+1 tokens "
              "costs over one plain step, the prediction with the three measured step times, and the same with a "
              "draft that costs nothing (the ceiling the verification pass leaves); 'draft / plain' = the draft step "
              f"over a plain step, beside the dearest one that would reach {plan.target_speedup:g}x here "
              "('-': not even a free draft would):")
        print(formula)
    print()
    print(best_by_task_line(records))
    print(best_lossless_line(records, sys.argv[1:] if argv is None else argv))
    print(f"\nload average {measurement_context()['load_average']}: timings are only comparable within this run.")
    if arguments.json is not None:
        write_benchmark_json(arguments.json, plan, records)
        print(f"records written to {arguments.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
