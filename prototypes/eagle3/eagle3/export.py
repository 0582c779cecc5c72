"""Stage 6: `optimum-cli export openvino` of the head, and the check that GenAI will run it as EAGLE-3.

optimum-intel maps `LlamaForCausalLMEagle3` to its own patched modelling file;
transformers scans that file's imports, so `einops` and `diffusers` must be
importable during the export (`extra_pythonpath` puts a folder holding them on
PYTHONPATH for the export process only). The export writes `eagle3_mode` into
the model's runtime info; without it `openvino_genai.draft_model` would load
the head as an ordinary draft model and fail.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from eagle3.settings import Eagle3Error


def export_command(head_dir: Path, output_dir: Path, weight_format: str = "fp16") -> list[str]:
    """The optimum-cli command that exports a head folder."""
    cli = Path(sys.executable).with_name("optimum-cli")
    return [str(cli), "export", "openvino", "--model", str(head_dir), "--task", "text-generation-with-past",
            "--trust-remote-code", "--weight-format", weight_format, str(output_dir)]


def has_eagle3_mode(exported_dir: Path) -> bool:
    """True if the exported model's runtime info carries `eagle3_mode` (set to true)."""
    import openvino as ov

    model = ov.Core().read_model(str(Path(exported_dir) / "openvino_model.xml"))
    if not model.has_rt_info("eagle3_mode"):
        return False
    value = model.get_rt_info("eagle3_mode")
    text = value.astype(str) if hasattr(value, "astype") else str(value)
    return text.strip().lower() in ("true", "1", "yes")


def export_head(head_dir: Path, output_dir: Path, weight_format: str = "fp16", extra_pythonpath: Path | None = None,
                log_file: Path | None = None, print_command: bool = True) -> float:
    """Export `head_dir` into `output_dir` (temporary sibling, renamed when checked); return the seconds taken."""
    from eagle3.atomic import atomic_folder
    from eagle3.checks import check_head_folder

    check_head_folder(Path(head_dir))
    output_dir = Path(output_dir)
    recipe = {"stage": "eagle3-export", "head": Path(head_dir).name, "weight_format": weight_format}
    env = dict(os.environ)
    if extra_pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_pythonpath), env.get("PYTHONPATH", "")]))
    started = time.perf_counter()
    with atomic_folder(output_dir, recipe) as work:
        command = export_command(Path(head_dir), work, weight_format)
        if print_command:
            print(shlex.join(command).replace(str(work), str(output_dir)))
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if log_file is not None:
            Path(log_file).write_text(done.stdout + "\n" + done.stderr, encoding="utf-8")
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            hint = ""
            if "einops" in tail or "diffusers" in tail:
                hint = (" Install einops and diffusers where the export can import them "
                        "(pip install --target <folder> einops diffusers; pass extra_pythonpath=<folder>).")
            raise Eagle3Error(f"optimum-cli export failed (exit {done.returncode}).{hint}\n{tail}")
        if not has_eagle3_mode(work):
            raise Eagle3Error(f"The export of {head_dir} carries no eagle3_mode in its runtime info: optimum-intel did "
                              "not recognise it as an EAGLE-3 head (check architectures in its config.json).")
    return time.perf_counter() - started
