"""The whole pipeline for one preset, each stage timed: `python -m eagle3.run --preset quick`.

Stages are skipped when their folder is up to date (same recipe). Writes
`runs/<preset>-summary.json` with every figure and each stage's seconds.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from eagle3.settings import OFFLINE_MAIN, PROTOTYPE_ROOT, Eagle3Settings, MainModel, get_settings, stage_folders

SITE = PROTOTYPE_ROOT / "site"  # einops + diffusers for the export only


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def build_head(settings: Eagle3Settings, main: MainModel = OFFLINE_MAIN, timings: dict | None = None) -> dict:
    """Stages 1-6: data, tapped states, vocabulary, training, folder, export. Returns the training figures."""
    import numpy as np
    import torch

    from eagle3.checks import check_exported_head, check_head_matches_main, check_main
    from eagle3.course import benchmark_prompts
    from eagle3.data import write_training_data
    from eagle3.export import export_head
    from eagle3.folder import save_head_folder
    from eagle3.head import Eagle3Head, load_main_embedding, shape_from_main_config
    from eagle3.hidden import load_tapped, write_tapped_states
    from eagle3.train import init_from_main, train_head
    from eagle3.vocab import draft_vocabulary

    timings = {} if timings is None else timings
    main_config = check_main(main.hf)
    check_main(main.openvino)
    folders = stage_folders(settings, main)
    held_out = [p.text for p in benchmark_prompts()]

    started = time.perf_counter()
    write_training_data(main.openvino, settings, folders.data, held_out, log=log)
    timings["data_s"] = time.perf_counter() - started
    log(f"data ready ({timings['data_s']:.0f} s): {folders.data}")

    started = time.perf_counter()
    write_tapped_states(main.openvino, folders.data, folders.hidden, settings.sequence_length,
                        max_minutes=settings.max_tapping_minutes)
    timings["hidden_s"] = time.perf_counter() - started
    log(f"tapped states ready ({timings['hidden_s']:.0f} s)")

    started = time.perf_counter()
    data = load_tapped(folders.hidden, mmap=False)
    eos = int(main_config.get("eos_token_id") or 0)
    vocab = draft_vocabulary(data.targets, settings.draft_vocab_size, int(main_config["vocab_size"]), [eos])
    timings["vocab_s"] = time.perf_counter() - started
    log(f"draft vocabulary {vocab.size} ids cover {vocab.coverage:.3f} of the main's greedy targets")

    started = time.perf_counter()
    shape = shape_from_main_config(main_config, settings.draft_vocab_size, settings.intermediate_size)
    head = Eagle3Head(shape)
    embedding = load_main_embedding(main.hf)
    init_from_main(head, embedding, vocab)
    history = train_head(head, data, vocab, settings, log=log)
    timings["train_s"] = time.perf_counter() - started

    started = time.perf_counter()
    final = history.validation[-1] if history.validation else {}
    figures = {"positions": int(len(data.tokens)), "samples": data.samples, "vocab_coverage": vocab.coverage,
               "head_parameters": head.parameter_count(), "epochs_done": history.epochs_done,
               "positions_seen": history.positions_seen, "final_validation": final,
               "validation": history.validation, "loss_curve": list(zip(history.steps, history.losses))}
    data_stats = json.loads((folders.data / "generation_stats.json").read_text(encoding="utf-8"))
    recipe = {"stage": "eagle3-head", "main": {"openvino": main.openvino.name, "hf": main.hf.name},
              "settings": settings.as_dict(), "data": data_stats,
              "training": {k: v for k, v in figures.items() if k != "loss_curve"},
              "versions": {"torch": torch.__version__, "numpy": np.__version__}}
    save_head_folder(head, main.hf, folders.head, recipe)
    check_head_matches_main(folders.head, main.hf)
    timings["save_s"] = time.perf_counter() - started

    timings["export_s"] = export_head(folders.head, folders.exported, settings.weight_format, SITE,
                                      log_file=PROTOTYPE_ROOT / "runs" / f"{settings.name}-export.log")
    check_exported_head(folders.exported, main.openvino)
    log(f"exported ({timings['export_s']:.0f} s): {folders.exported}")
    return figures


def evaluate_head(settings: Eagle3Settings, main: MainModel = OFFLINE_MAIN, max_new_tokens: int = 96,
                  repeats: int = 3, assistant_tokens: int = 3, prompts: list[Any] | None = None,
                  tree: bool = True, timings: dict | None = None) -> dict:
    """Stage 7: chain mode vs plain on the held-out prompts, then the tree-mode KV-cache trap."""
    from eagle3.course import benchmark_prompts
    from eagle3.evaluate import compare, generation_config, load_eagle3, load_plain, summarise, tree_trap

    timings = {} if timings is None else timings
    folders = stage_folders(settings, main)
    prompts = benchmark_prompts() if prompts is None else prompts
    started = time.perf_counter()
    plain = load_plain(main.openvino)
    eagle = load_eagle3(main.openvino, folders.exported)
    # record rather than raise here, so that a long run always leaves its figures; the summary says if all matched
    results = compare(plain, eagle, prompts, generation_config(max_new_tokens, assistant_tokens), max_new_tokens,
                      repeats, require_identical=False, log=log)
    del plain, eagle
    summary = summarise(results)
    timings["evaluate_s"] = time.perf_counter() - started
    log(f"chain K={assistant_tokens}: {json.dumps(summary['all'])}")
    report = {"chain": {"num_assistant_tokens": assistant_tokens, "max_new_tokens": max_new_tokens,
                        "repeats": repeats, "per_prompt": [r.as_dict() for r in results], "summary": summary}}
    if tree:
        started = time.perf_counter()
        report["tree"] = tree_trap(main.openvino, folders.exported, prompts, max_new_tokens, log=log)
        timings["tree_s"] = time.perf_counter() - started
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--assistant-tokens", type=int, default=3)
    parser.add_argument("--no-tree", action="store_true")
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    settings = get_settings(args.preset)
    timings: dict = {}
    total = time.perf_counter()
    figures = {} if args.skip_build else build_head(settings, timings=timings)
    PROTOTYPE_ROOT.joinpath("runs", f"{settings.name}{args.tag}-training.json").write_text(
        json.dumps({"timings": timings, "training": figures}, indent=2, default=str), encoding="utf-8")
    report = evaluate_head(settings, max_new_tokens=args.max_new_tokens, repeats=args.repeats,
                           assistant_tokens=args.assistant_tokens, tree=not args.no_tree, timings=timings)
    timings["total_s"] = time.perf_counter() - total
    out = PROTOTYPE_ROOT / "runs" / f"{settings.name}{args.tag}-summary.json"
    out.write_text(json.dumps({"settings": settings.as_dict(), "timings": timings, "training": figures,
                               "evaluation": report}, indent=2, default=str), encoding="utf-8")
    log(f"timings {json.dumps({k: round(v, 1) for k, v in timings.items()})}; wrote {out}")


if __name__ == "__main__":
    main()
