"""An EAGLE-3 head for the Qwen2.5-Coder pair's main (1.5B), on notebook 08's training scaffold (issue 39).

    python -m maintainers.eagle3_coder --preset quick|chunks|reference|more-answers [--dry-run]

Stages, each an atomic folder under the models folder reused while its recipe matches:

1. data - from this machine's Python standard library, in two kinds (a preset chooses how many of each):
   - teacher-forced chunks of its sources, each put in the main's chat template as a user message and an
     assistant reply holding the chunk in a ```python block that ends with `<|im_end|>` (151645);
   - the main's own answers: prompts made from its functions' docstrings ("Write a Python function `name(args)`
     that does this: <first docstring line>"), answered by the main (greedy, batched on a continuous-batching
     pipeline, stopping at `<|im_end|>` or EOS 151643; the scaffold's own data stage stops only at EOS and would let
     Qwen run on past its turn).
   Some files are held out - never in training - and named in the recipe; no prompt equals a course prompt;
2. tapped states - `utils.training.eagle3_hidden`: the exact f32 main's three tapped layers, and its own argmax at
   every position as the label (from the same prefill: no generation);
3. training - `utils.training.eagle3_train.train_and_save_head`, as for notebook 08's head: the output rows start
   from the main's untied `lm_head`, both end tokens (151645, 151643) stay in the draft vocabulary;
4. export - `utils.training.eagle3_folder.export_head`, then `eagle3_checks.check_exported_head`.

Nothing in `utils` or the notebooks imports this module.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from utils.training.eagle3_settings import HEAD_CODE, Eagle3Settings, eagle3_folders
from utils.training.scaffold import MainModel, Sample, TrainingError

THIS_CODE = ("maintainers.eagle3_coder",)
IM_END = 151645  # <|im_end|>: Qwen's end of a chat turn, what the instruct model stops at
HEAD_STEM = "qwen2.5-coder-1.5b"
# Skipped parts of the standard library: its tests, IDLE, the Tk demos/tests, installed packages, caches.
SKIPPED_PARTS = frozenset({"test", "tests", "idlelib", "idle_test", "site-packages", "dist-packages", "__pycache__",
                           "turtledemo", "lib2to3"})
USER_MESSAGES = (
    "Continue this Python file ({path}):\n```python\n{context}\n```",
    "Write the code that follows in {path}:\n```python\n{context}\n```",
    "Show me a part of the source of Python's `{module}` module.",
)
STATS_FILE = "generation_stats.json"  # the scaffold's name (`scaffold.STATS_FILE`)
SAMPLES_FILE = "samples.jsonl"  # the scaffold's name (`scaffold.SAMPLES_FILE`)
CONTEXT_TOKENS = 96  # at most this many tokens of context lines in a user message
TAP_BATCH_TOKENS = 1024  # 1024 x 151,936 f32 logits = 0.6 GB per prefill (2048 would be 1.2 GB)


@dataclass(frozen=True)
class CoderHeadSettings(Eagle3Settings):
    """`Eagle3Settings` plus the teacher-forced data: `chunks` chunks of at most `chunk_tokens` tokens, one per
    standard-library file, `context_lines` lines before each in the user message, `held_out_files` files never used.
    `sequence_length` must hold template + context + chunk + end (checked when the samples are made)."""

    chunks: int = 16
    chunk_tokens: int = 256
    context_lines: int = 6
    held_out_files: int = 8
    tap_batch_tokens: int = TAP_BATCH_TOKENS
    answers: int = 0  # prompts from docstrings that the main answers itself (0: teacher-forced chunks only)
    answer_tokens: int = 160  # at most this many tokens per answer
    answer_batch: int = 16  # sequences generated together (in the recipe: batching can move bf16 rounding)
    answers_per_file: int = 2  # at most this many documented functions of one standard-library file

    def __post_init__(self) -> None:
        super().__post_init__()
        if (min(self.chunk_tokens, self.held_out_files, self.tap_batch_tokens, self.answer_tokens,
                self.answer_batch, self.answers_per_file) < 1
                or min(self.chunks, self.answers, self.context_lines) < 0 or self.chunks + self.answers < 1):
            raise TrainingError("chunk_tokens, held_out_files, tap_batch_tokens, answer_tokens, answer_batch and "
                                "answers_per_file must be >= 1, chunks, answers and context_lines >= 0, and "
                                "chunks + answers >= 1.")

    def data_settings(self) -> dict:
        return {key: getattr(self, key) for key in ("chunks", "chunk_tokens", "context_lines", "held_out_files",
                                                    "seed", "answers", "answer_tokens", "answer_batch",
                                                    "answers_per_file")}


CoderHeadSettings.PRESETS = {
    # CI: every stage in a few minutes on 2 cores; small vocabulary, 2 epochs
    "quick": CoderHeadSettings(name="quick", chunks=16, chunk_tokens=256, sequence_length=448, draft_vocab_size=2048,
                               epochs=2.0, batch_tokens=1024, warmup_steps=2),
    # teacher-forced chunks of the sources: 190 chunks of <= 384 tokens (+ template and context). Built 2026-12-04
    # on an idle 2-core AMD EPYC in 36 min: 73,449 positions, tapping 1,371 s, 3 epochs of training 743 s, export
    # 26 s. Its benchmark run: docs/data/benchmark-qwen2.5-coder-eagle3-head.json.
    "chunks": CoderHeadSettings(name="chunks", chunks=190, chunk_tokens=384, held_out_files=40,
                                sequence_length=576, draft_vocab_size=8192, epochs=3.0, batch_tokens=2048,
                                weight_format="int8"),
    # the reference head (the reference run's notebook 08 measures it): the main's own answers to 320 docstring
    # prompts, a quarter of them asking for prose, answers of <= 160 tokens, 10 epochs.
    # Built 2026-12-07 on an idle 2-core AMD EPYC in 46 min: 40,685 answer tokens generated in 303 s, 61,655
    # positions tapped in 602 s, 10 epochs (310 steps) trained in 1,827 s, export 24 s.
    "reference": CoderHeadSettings(name="reference", chunks=0, held_out_files=40, answers=320, answer_tokens=160,
                                   sequence_length=320, draft_vocab_size=8192, epochs=10.0, batch_tokens=2048,
                                   weight_format="int8"),
    # the reference recipe with twice the answers (three functions a file, not two) and 5 epochs, as many steps as
    # the reference's 10. Built 2026-12-07 on a 2-core AMD EPYC: 81,009 answer tokens generated in 957 s, 123,190
    # positions tapped in 2,217 s, 310 steps trained in 2,262 s, export 33 s. Its benchmark run:
    # docs/data/benchmark-qwen2.5-coder-eagle3-more-answers.json.
    "more-answers": CoderHeadSettings(name="more-answers", chunks=0, held_out_files=40, answers=640,
                                      answers_per_file=3, answer_tokens=160, sequence_length=320,
                                      draft_vocab_size=8192, epochs=5.0, batch_tokens=2048, weight_format="int8"),
}


class CoderMain(MainModel):
    """The Coder pair's main: the OpenVINO int4 model and its float16 Hugging Face copy, named for folders."""

    @property
    def stem(self) -> str:
        return HEAD_STEM


def coder_main() -> CoderMain:
    """The main's folders; one-line errors if the pair or its Hugging Face copy is missing."""
    from utils.models.coder_pair import CoderPairError, hf_copies, missing_pair_message
    from utils.models.model_catalogue import QWEN_CODER_MAIN

    message = missing_pair_message()
    if message is not None:
        raise TrainingError(message)
    try:
        main_hf = hf_copies()[0]
    except CoderPairError as error:
        raise TrainingError(str(error)) from None
    return CoderMain(QWEN_CODER_MAIN.path, main_hf, "Qwen2.5-Coder-1.5B-Instruct")


# --------------------------------------------------------------------------- stage 1: the teacher-forced data


def stdlib_files(root: Path | None = None) -> list[str]:
    """The standard library's .py files under `root` (default: this interpreter's), relative, sorted; tests, IDLE,
    Tk demos, site-packages and caches left out."""
    root = Path(sysconfig.get_paths()["stdlib"] if root is None else root)
    found = []
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        if SKIPPED_PARTS & set(relative.parts[:-1]) or relative.name.startswith("test_"):
            continue
        found.append(relative.as_posix())
    return sorted(found)


def split_files(files: Sequence[str], held_out: int, seed: int) -> tuple[list[str], list[str]]:
    """(training candidates in a seeded order, held-out files sorted): the first `held_out` of the shuffle held out."""
    order = list(files)
    random.Random(seed).shuffle(order)
    return order[held_out:], sorted(order[:held_out])


def _module_name(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def file_chunk(text: str, encode: Callable[[str], list[int]], chunk_tokens: int, context_lines: int,
               seed: str) -> tuple[str, str] | None:
    """(context, chunk) from one file: whole lines starting at a seeded non-blank line, at most `chunk_tokens`
    tokens, and up to `context_lines` lines before it (at most `CONTEXT_TOKENS` tokens); None if the file has too
    little code."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip()]
    if len(starts) < 4:
        return None
    start = random.Random(seed).choice(starts[: max(1, len(starts) * 3 // 4)])
    budget = max(1, chunk_tokens * 4)  # characters: more than enough, trimmed by tokens below
    end = start
    size = 0
    while end < len(lines) and size + len(lines[end]) <= budget:
        size += len(lines[end])
        end += 1
    end = max(end, start + 1)
    while end > start + 1 and len(encode("".join(lines[start:end]))) > chunk_tokens:
        end = start + max(1, (end - start) * 9 // 10)
    chunk = "".join(lines[start:end])
    if not chunk.endswith("\n"):
        chunk += "\n"
    if len(encode(chunk)) > chunk_tokens or not chunk.strip():
        return None
    first = max(0, start - context_lines)
    while first < start and len(encode("".join(lines[first:start]))) > CONTEXT_TOKENS:
        first += 1
    return "".join(lines[first:start]).rstrip("\n"), chunk


def make_samples(root: Path, files: Sequence[str], encode: Callable[[str], list[int]], template: tuple[str, str],
                 settings: CoderHeadSettings, end_id: int = IM_END) -> list[Sample]:
    """`settings.chunks` teacher-forced samples, one chunk per file of `files` in order (files without a usable
    chunk skipped): template, user message, assistant tag, then the reply "```python\\n<chunk>```" and `end_id`.
    `answer_start` is the reply's first token; raise if the files run out or a sample exceeds `sequence_length`."""
    before, after = template
    before_ids, after_ids = encode(before), encode(after)
    samples: list[Sample] = []
    for path in files:
        if len(samples) >= settings.chunks:
            break
        text = (Path(root) / path).read_text(encoding="utf-8", errors="replace")
        cut = file_chunk(text, encode, settings.chunk_tokens, settings.context_lines, f"{settings.seed}:{path}")
        if cut is None:
            continue
        context, chunk = cut
        form = USER_MESSAGES[len(samples) % len(USER_MESSAGES)]
        if "{context}" in form and not context.strip():
            form = USER_MESSAGES[-1]
        user_text = form.format(path=path, context=context, module=_module_name(path))
        prompt_ids = before_ids + encode(user_text) + after_ids
        answer_ids = encode(f"```python\n{chunk}```") + [int(end_id)]
        ids = prompt_ids + answer_ids
        if len(ids) > settings.sequence_length:
            raise TrainingError(f"A sample of {path} has {len(ids)} tokens, more than sequence_length "
                                f"{settings.sequence_length}: raise it or lower chunk_tokens / context_lines.")
        # `opener` holds the file the chunk comes from
        samples.append(Sample(len(samples), "code", path, "teacher-forced", user_text, ids, len(before_ids),
                              len(prompt_ids)))
    if len(samples) < settings.chunks:
        raise TrainingError(f"Only {len(samples)} usable standard-library files for {settings.chunks} chunks: lower "
                            "chunks or held_out_files.")
    return samples


PROMPT_FORMS = (  # three ask for code, one for prose (the benchmark's chat and summaries are prose)
    "Write a Python function `{signature}` that does this: {summary}",
    "Implement `{signature}` as in Python's `{module}` module: {summary}",
    "In Python, write `{signature}`. {summary} Keep it short.",
    "In a few sentences, explain what `{signature}` in Python's `{module}` module is for and when to use it: "
    "{summary}",
)


def docstring_prompts(root: Path, files: Sequence[str], count: int, per_file: int = 2) -> list[tuple[str, str]]:
    """(file, user message) for up to `count` documented public functions of `files`, in order, at most `per_file` a
    file: a request for the function, named with its arguments, described by its docstring's first sentence."""
    import ast

    prompts: list[tuple[str, str]] = []
    for path in files:
        if len(prompts) >= count:
            break
        try:
            tree = ast.parse((Path(root) / path).read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        taken = 0
        for node in ast.walk(tree):
            if taken >= per_file or len(prompts) >= count:
                break
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
                continue
            summary = " ".join((ast.get_docstring(node) or "").split("\n\n")[0].split())
            if not 20 <= len(summary) <= 300:
                continue
            signature = f"{node.name}({ast.unparse(node.args)})"
            form = PROMPT_FORMS[len(prompts) % len(PROMPT_FORMS)]
            prompts.append((path, form.format(signature=signature, module=_module_name(path), summary=summary)))
            taken += 1
    return prompts


def answer_samples(main_ov: Path, prompts: Sequence[tuple[str, str]], settings: CoderHeadSettings, first_id: int = 0,
                   show_progress: bool = True) -> tuple[list[Sample], dict]:
    """The main answers each prompt (greedy, `settings.answer_batch` at a time): samples of template, prompt and
    answer (+ `<|im_end|>` where the answer ended its turn), and the generation's tokens and seconds."""
    import openvino_genai

    from utils.training.scaffold import chat_template_parts, data_pipeline, run_batched, text_token_ids

    pipeline = data_pipeline(main_ov, settings.answer_batch)
    tokenizer = pipeline.get_tokenizer()
    ends = {IM_END, int(tokenizer.get_eos_token_id())}
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = settings.answer_tokens
    config.eos_token_id = IM_END
    config.stop_token_ids = ends
    before, after = chat_template_parts(tokenizer)
    before_ids, after_ids = text_token_ids(tokenizer, before), text_token_ids(tokenizer, after)
    inputs = [before_ids + text_token_ids(tokenizer, text) + after_ids for _, text in prompts]
    answers, seconds = run_batched(pipeline, [(ids, config) for ids in inputs], "answers by the main", show_progress,
                                   2 * settings.answer_batch)
    samples: list[Sample] = []
    for (path, text), ids, answer in zip(prompts, inputs, answers, strict=True):
        answer = [token for token in answer if token not in ends]
        if not answer:
            continue
        ended = len(answer) < settings.answer_tokens
        token_ids = (ids + answer + ([IM_END] if ended else []))[:settings.sequence_length]
        samples.append(Sample(first_id + len(samples), "code", path, "greedy", text, token_ids, len(before_ids),
                              len(ids)))
    generated = sum(len(answer) for answer in answers)
    return samples, {"answers": len(samples), "answer_tokens_generated": generated, "generation_seconds": seconds,
                     "generated_tokens_per_hour": generated / max(seconds, 1e-9) * 3600}


def files_digest(root: Path, files: Sequence[str]) -> str:
    """A hash of the files' names and contents."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.encode() + b"\0" + (Path(root) / path).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def data_recipe(settings: CoderHeadSettings, main: MainModel, root: Path, used: Sequence[str],
                held_out: Sequence[str]) -> dict:
    from utils.training.scaffold import stage_recipe

    python = ".".join(str(part) for part in sys.version_info[:3])
    return stage_recipe("eagle3-coder-data", {"main": main.openvino.name, **settings.data_settings(),
                                              "python": python, "files_sha256": files_digest(root, used),
                                              "held_out": list(held_out)},
                        [main.openvino], ("openvino", "openvino-genai"), THIS_CODE)


def write_data(settings: CoderHeadSettings, main: MainModel, folder: Path, root: Path | None = None,
               force: bool = False) -> tuple[Path, dict]:
    """Build (or reuse) the data folder the scaffold's tapping stage reads: `samples.jsonl` of `Sample` records."""
    import openvino_genai

    from utils.decoding.prompts import PROMPTS
    from utils.models.atomic_folder import atomic_folder, is_up_to_date
    from utils.training.scaffold import chat_template_parts, held_out_overlap, load_stats, save_samples, text_token_ids

    root = Path(sysconfig.get_paths()["stdlib"] if root is None else root)
    started = time.perf_counter()
    tokenizer = openvino_genai.Tokenizer(str(main.openvino))
    candidates, held_out = split_files(stdlib_files(root), settings.held_out_files, settings.seed)
    samples = make_samples(root, candidates, lambda text: text_token_ids(tokenizer, text),
                           chat_template_parts(tokenizer), settings) if settings.chunks else []
    prompts = (docstring_prompts(root, candidates, settings.answers, settings.answers_per_file) if settings.answers
               else [])
    if len(prompts) < settings.answers:
        raise TrainingError(f"Only {len(prompts)} documented functions for {settings.answers} answers: lower answers "
                            "or held_out_files, or raise answers_per_file.")
    leaked = held_out_overlap((text for _, text in prompts), [prompt.text for prompt in PROMPTS])
    if leaked:
        raise TrainingError(f"A docstring prompt equals a course prompt ({leaked[0][:60]!r}): it must stay held out.")
    used = sorted({sample.opener for sample in samples} | {path for path, _ in prompts})
    recipe = data_recipe(settings, main, root, used, held_out)
    if not force and is_up_to_date(folder, recipe):
        print(f"Reusing the training data in {folder}")
        return folder, load_stats(folder)
    generation: dict = {}
    if prompts:
        answered, generation = answer_samples(main.openvino, prompts, settings, len(samples))
        samples += answered
    stats = {"samples": len(samples), "sequence_tokens": sum(len(s.token_ids) for s in samples),
             "answer_tokens": sum(s.answer_tokens for s in samples), "files": used, "held_out": held_out,
             **generation, "wall_seconds": time.perf_counter() - started}
    with atomic_folder(folder, recipe) as work:
        save_samples(samples, work, stats)
    return folder, stats


# --------------------------------------------------------------------------- stage 3: training (the scaffold's, lm_head from the main's own)


def coder_head_recipe(settings: CoderHeadSettings, hidden_dir: Path, main_hf_dir: Path) -> dict:
    from utils.training.scaffold import stage_recipe

    trained_by = {key: value for key, value in settings.as_dict().items()
                  if key not in ("weight_format", "name", "tap_batch_tokens")}
    return stage_recipe("eagle3-coder-head", trained_by, [hidden_dir, main_hf_dir], ("torch",), (*HEAD_CODE,
                                                                                                 *THIS_CODE))


# --------------------------------------------------------------------------- checks and the whole build


def tapped_bytes(settings: CoderHeadSettings, hidden_size: int = 1536) -> int:
    """An upper bound of the tapped states' size: every position of every sample, 3 x hidden float16 values."""
    return (settings.chunks + settings.answers) * settings.sequence_length * (3 * hidden_size * 2 + 12)


def preflight(settings: CoderHeadSettings, main: MainModel | None = None) -> MainModel:
    """One-line errors before any long work: the pair, the Hugging Face copy, the layers, the disk."""
    from utils.paths import models_dir
    from utils.training.eagle3_checks import check_export_packages, check_main
    from utils.training.eagle3_hidden import tapped_layers
    from utils.training.scaffold import require_complete

    main = coder_main() if main is None else main
    require_complete(main.hf, "main model (Hugging Face copy)", "run python -m maintainers.coder_pair")
    config = check_main(main.hf)
    tapped_layers(int(config["num_hidden_layers"]))
    check_main(main.openvino)
    check_export_packages()
    need = tapped_bytes(settings, int(config["hidden_size"])) + 2 * 10**9  # + head folders and exports
    free = shutil.disk_usage(models_dir()).free
    if free < need:
        raise TrainingError(f"{models_dir()} has {free / 1e9:.1f} GB free; the {settings.name} head needs about "
                            f"{need / 1e9:.1f} GB (tapped states + head). Free some disk or use a smaller preset.")
    return main


def _rate(tokens: float, seconds: float) -> str:
    return f"{seconds:.1f} s, {tokens / max(seconds, 1e-9) * 3600:,.0f} tokens/hour"


def build(preset: str | CoderHeadSettings, force: bool = False, show_progress: bool = True,
          main: MainModel | None = None) -> dict:
    """Every stage for `preset`: data -> tapped states -> training -> export -> check; each stage's time printed.
    Returns the folders and what each stage measured."""
    import numpy as np

    from utils.models.atomic_folder import atomic_folder, is_up_to_date
    from utils.training.eagle3_checks import check_exported_head
    from utils.training.eagle3_folder import TRAINING_FILE, export_head
    from utils.training.eagle3_hidden import OFFSETS_FILE, save_tapped, tap_hidden_states
    from utils.training.eagle3_settings import hidden_recipe
    from utils.training.eagle3_train import train_and_save_head
    from utils.training.scaffold import load_samples

    settings = CoderHeadSettings.preset(preset)
    main = preflight(settings, main)
    folders = eagle3_folders(settings, main)
    times: dict[str, dict] = {}

    started = time.perf_counter()
    _, data_stats = write_data(settings, main, folders.data, force=force)
    times["data"] = {"seconds": time.perf_counter() - started, "tokens": data_stats["sequence_tokens"]}

    started = time.perf_counter()
    recipe = hidden_recipe(settings, main.openvino, folders.data)
    if force or not is_up_to_date(folders.hidden, recipe):
        samples = load_samples(folders.data)
        sequences = [sample.token_ids[:settings.sequence_length] for sample in samples]
        data, stats = tap_hidden_states(main.openvino, sequences, batch_tokens=settings.tap_batch_tokens,
                                        show_progress=show_progress)
        data.answer_starts = np.asarray([min(s.answer_start, settings.sequence_length) for s in samples],
                                        dtype=np.int64)
        with atomic_folder(folders.hidden, recipe) as work:
            save_tapped(data, work, stats)
    positions = int(np.load(folders.hidden / OFFSETS_FILE)[-1])
    times["tapped states"] = {"seconds": time.perf_counter() - started, "tokens": positions}

    started = time.perf_counter()
    head_recipe = coder_head_recipe(settings, folders.hidden, main.hf)
    if force or not is_up_to_date(folders.head, head_recipe):
        training = train_and_save_head(settings, main, folders, head_recipe, show_progress)
    else:
        training = json.loads((folders.head / TRAINING_FILE).read_text(encoding="utf-8"))
    times["training"] = {"seconds": time.perf_counter() - started, "tokens": training.get("tokens_seen", 0)}

    started = time.perf_counter()
    export_head(folders.head, folders.exported, settings.weight_format)
    check_exported_head(folders.exported, main.openvino)
    times["export"] = {"seconds": time.perf_counter() - started, "tokens": 0}

    for stage, measured in times.items():
        shown = _rate(measured["tokens"], measured["seconds"]) if measured["tokens"] else f"{measured['seconds']:.1f} s"
        print(f"{stage:>14}: {shown}")
    last = (training.get("evaluations") or [{}])[-1]
    print(f"validation chain accuracy {last.get('answer_chain_accuracy')}; head in {folders.exported}")
    return {"folders": folders, "times": times, "data": data_stats, "training": training}


def dry_run(preset: str) -> None:
    settings = CoderHeadSettings.preset(preset)
    main = preflight(settings)
    folders = eagle3_folders(settings, main)
    print(f"preset {settings.name}: {settings.chunks} chunks x <= {settings.chunk_tokens} tokens, {settings.answers} "
          f"answers by the main x <= {settings.answer_tokens} tokens, draft vocabulary "
          f"{settings.draft_vocab_size}, {settings.epochs} epochs, export {settings.weight_format}")
    print(f"tapped states at most {tapped_bytes(settings) / 1e9:.2f} GB; folders {folders.data.name} ... "
          f"{folders.exported.name} in {folders.data.parent}")
    print("inputs ready; nothing built (--dry-run)")


def main_command(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m maintainers.eagle3_coder", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=sorted(CoderHeadSettings.PRESETS), default="quick")
    parser.add_argument("--dry-run", action="store_true", help="check the inputs and print the plan only")
    parser.add_argument("--force", action="store_true", help="rebuild every stage")
    args = parser.parse_args(argv)
    try:
        if args.dry_run:
            dry_run(args.preset)
        else:
            build(args.preset, force=args.force)
    except TrainingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main_command())
