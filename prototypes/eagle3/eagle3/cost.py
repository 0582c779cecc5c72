"""What a head costs beside its main, before any training: c for a randomly initialised head.

c (one head step / one plain main step) does not depend on the weights'
values, only on their shapes and format, so a random head in the right shape
measures it. Used for the Qwen2.5-Coder 1.5B main (32,000-token draft
vocabulary, the main's MLP width), whose training would not fit this machine.

    python -m eagle3.cost --main-ov <main OpenVINO folder> --main-hf <main HF folder>
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from eagle3.settings import MODELS_DIR, PROTOTYPE_ROOT


def build_random_head(main_hf_dir: Path, folder: Path, draft_vocab_size: int, intermediate_size: int | None = None,
                      seed: int = 0) -> Path:
    """A random head for `main_hf_dir` (draft vocabulary = the first ids), saved in the SpecForge layout."""
    import numpy as np
    import torch

    from eagle3.folder import save_head_folder
    from eagle3.head import Eagle3Head, shape_from_main_config
    from eagle3.vocab import DraftVocabulary

    config = json.loads((Path(main_hf_dir) / "config.json").read_text(encoding="utf-8"))
    torch.manual_seed(seed)
    shape = shape_from_main_config(config, draft_vocab_size, intermediate_size)
    head = Eagle3Head(shape)
    vocab = DraftVocabulary(np.arange(draft_vocab_size, dtype=np.int64), shape.vocab_size, float("nan"))
    with torch.no_grad():
        head.d2t.copy_(torch.from_numpy(vocab.d2t()))
        head.t2d.copy_(torch.from_numpy(vocab.t2d()))
    recipe = {"stage": "eagle3-random-head", "main": Path(main_hf_dir).name, "draft_vocab_size": draft_vocab_size,
              "intermediate_size": shape.intermediate_size, "parameters": head.parameter_count(), "seed": seed}
    save_head_folder(head, Path(main_hf_dir), Path(folder), recipe, include_embedding=False)
    return Path(folder)


def main() -> None:
    from eagle3.course import benchmark_prompts
    from eagle3.evaluate import compare, generation_config, load_eagle3, load_plain, summarise
    from eagle3.export import export_head

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--main-ov", type=Path, default=MODELS_DIR / "qwen2.5-coder-1.5b-instruct-int4-ov")
    parser.add_argument("--main-hf", type=Path, default=MODELS_DIR / "qwen2.5-coder-1.5b-instruct-q4_k_m-hf-fp16")
    parser.add_argument("--draft-vocab-size", type=int, default=32000)
    parser.add_argument("--formats", default="fp16,int8")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=3)
    args = parser.parse_args()
    root = PROTOTYPE_ROOT / "models"
    head = root / f"{args.main_hf.name}-eagle3-random-hf"
    started = time.perf_counter()
    if not (head / ".complete").is_file():
        build_random_head(args.main_hf, head, args.draft_vocab_size)
    report: dict = {"main": args.main_ov.name, "head": head.name, "build_s": time.perf_counter() - started,
                    "parameters": json.loads((head / "eagle3_recipe.json").read_text())["parameters"]}
    prompts = [p for p in benchmark_prompts() if p.task == "code"][:1] + \
              [p for p in benchmark_prompts() if p.task != "code"][:max(args.prompts - 1, 0)]
    for weight_format in args.formats.split(","):
        exported = root / f"{args.main_hf.name}-eagle3-random-{weight_format}-ov"
        report[f"export_{weight_format}_s"] = export_head(head, exported, weight_format, PROTOTYPE_ROOT / "site",
                                                          log_file=PROTOTYPE_ROOT / "runs" / f"qwen-{weight_format}-export.log")
        plain = load_plain(args.main_ov)
        eagle = load_eagle3(args.main_ov, exported)
        results = compare(plain, eagle, prompts, generation_config(args.max_new_tokens, 3), args.max_new_tokens,
                          args.repeats, log=print)
        del plain, eagle
        report[weight_format] = {"per_prompt": [r.as_dict() for r in results], "summary": summarise(results)}
        print(weight_format, json.dumps(report[weight_format]["summary"]["all"]), flush=True)
    out = PROTOTYPE_ROOT / "runs" / "qwen-random-head-cost.json"
    out.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    print("wrote", out)


if __name__ == "__main__":
    main()
