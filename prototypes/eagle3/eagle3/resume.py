"""Continue training a saved head (a second phase with its own schedule), then save, export and evaluate it.

    python -m eagle3.resume --preset reference --minutes 10 --learning-rate 1.5e-3 --batch-tokens 1024

Used for the reference run here: its first phase's warm-up (50 steps) was most of the steps that 14 minutes
allow on a busy 2-core machine (13 s a step), so its learning rate never reached its peak.
"""
from __future__ import annotations

import argparse
import json
import time

from eagle3.settings import OFFLINE_MAIN, PROTOTYPE_ROOT, get_settings, stage_folders


def main() -> None:
    from eagle3.atomic import read_recipe
    from eagle3.folder import load_head_folder, save_head_folder
    from eagle3.head import load_main_embedding
    from eagle3.hidden import load_tapped
    from eagle3.run import SITE, evaluate_head, log
    from eagle3.train import train_head
    from eagle3.vocab import vocabulary_from_d2t
    from eagle3.checks import check_exported_head
    from eagle3.export import export_head

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="reference")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--learning-rate", type=float, default=1.5e-3)
    parser.add_argument("--batch-tokens", type=int, default=1024)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--no-tree", action="store_true")
    args = parser.parse_args()
    first = get_settings(args.preset)
    settings = get_settings(first, max_training_minutes=args.minutes, learning_rate=args.learning_rate,
                            batch_tokens=args.batch_tokens, warmup_steps=args.warmup_steps, epochs=20.0)
    main_model = OFFLINE_MAIN
    folders = stage_folders(first, main_model)
    timings: dict = {}
    previous = read_recipe(folders.head) or {}
    head = load_head_folder(folders.head)
    with __import__("torch").no_grad():
        head.embed_tokens.weight.copy_(load_main_embedding(main_model.hf))
    data = load_tapped(folders.hidden, mmap=False)
    vocab = vocabulary_from_d2t(head.d2t.numpy(), head.shape.vocab_size)
    started = time.perf_counter()
    history = train_head(head, data, vocab, settings, log=log)
    timings["train_phase2_s"] = time.perf_counter() - started
    recipe = previous | {"phase2": {"settings": settings.as_dict(), "epochs_done": history.epochs_done,
                                    "positions_seen": history.positions_seen, "validation": history.validation,
                                    "seconds": history.seconds}}
    save_head_folder(head, main_model.hf, folders.head, recipe)
    PROTOTYPE_ROOT.joinpath("runs", f"{first.name}-phase2-training.json").write_text(
        json.dumps({"timings": timings, "validation": history.validation,
                    "loss_curve": list(zip(history.steps, history.losses))}, indent=2), encoding="utf-8")
    timings["export_s"] = export_head(folders.head, folders.exported, first.weight_format, SITE,
                                      log_file=PROTOTYPE_ROOT / "runs" / f"{first.name}-export.log")
    check_exported_head(folders.exported, main_model.openvino)
    log(f"exported ({timings['export_s']:.0f} s)")
    report = evaluate_head(first, max_new_tokens=args.max_new_tokens, repeats=args.repeats, tree=not args.no_tree,
                           timings=timings)
    out = PROTOTYPE_ROOT / "runs" / f"{first.name}-phase2-summary.json"
    out.write_text(json.dumps({"settings": settings.as_dict(), "timings": timings, "evaluation": report}, indent=2,
                              default=str), encoding="utf-8")
    log(f"timings {json.dumps({k: round(v, 1) for k, v in timings.items()})}; wrote {out}")


if __name__ == "__main__":
    main()
