"""Writes the draft notebook 08 (no outputs)."""
import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = []
md = lambda s: cells.append(new_markdown_cell(s.strip()))
code = lambda s: cells.append(new_code_cell(s.strip()))

md("""
# 08 · EAGLE-3: a draft head that reads the main model's hidden states

[← 07 Speculative-decoding playground](07-speculative-decoding-playground.ipynb) · [Course overview](../README.md)

Notebooks 02–06 drafted with a *separate* small model (or the main's own int4 copy). EAGLE-3 drafts with a **head**:
one decoder layer that reads three hidden states the main model has already computed, so it starts where the main
left off instead of re-reading the text. OpenVINO GenAI 2026.4 leads its speculative-decoding docs with it, and
optimum-intel exports such heads. No public head exists for our offline main, so we train one here, on 2 CPU cores.

**You will learn**
- what an EAGLE-3 head reads (three tapped hidden states fused by `fc`, plus the embedding of the next token) and why
  one step of it costs only a few percent of a main step;
- the head's folder format (SpecForge layout), its export with `optimum-cli`, and running it with
  `openvino_genai.draft_model` + `LLMPipeline` + `SchedulerConfig`, chain mode and tree mode;
- how to train a head for your own main: data the main writes itself, the tapped states, the draft vocabulary and
  `d2t`, and the training-time unroll; and how to measure it (c, tokens per main pass, speed-up, identical output).

**Time and needs:** the `quick` preset runs in about 5 minutes on 2 cores (it only checks the pipeline: its head
is too small to speed anything up); `reference` takes about 45 minutes. About 1 GB of disk, 4 GB of RAM, no network
(the published-head cell at the end needs the Hugging Face hub and fails fast without it).
Pair: the offline pair's main, SmolLM2-135M-Instruct (`models/smollm2-135m-instruct-fp16-ov` and its Hugging Face
folder); the Qwen2.5-Coder 1.5B main appears in the cost section.

**Sources:** Li et al., *EAGLE-3: Scaling up Inference Acceleration of Large Language Models via Training-Time Test*
([arXiv:2503.01840](https://arxiv.org/abs/2503.01840)); EAGLE ([arXiv:2401.15077](https://arxiv.org/abs/2401.15077));
Leviathan et al. ([arXiv:2211.17192](https://arxiv.org/abs/2211.17192)) for the speed-up formula;
[SpecForge](https://github.com/sgl-project/SpecForge) for the folder layout;
[OpenVINO GenAI speculative decoding](https://openvinotoolkit.github.io/openvino.genai/) and
[optimum-intel](https://github.com/huggingface/optimum-intel) for the export and the runtime.
""")

md("""
## Parameters
The only cell to edit. `PRESET` picks the training size (`eagle3.settings.PRESETS`); pass
`get_settings("reference", max_training_minutes=30)` to change one setting.
""")
code("""
import os

PRESET = os.environ.get("EAGLE3_PRESET", "quick")   # "quick" (CI: checks the code) or "reference" (the real head)
DEVICE = "CPU"
MAX_NEW_TOKENS = 96
ASSISTANT_TOKENS = 3        # chain length K; verifying K >= 4 tokens costs much more on this CPU (notebook 05)
REPEATS = 1 if PRESET == "quick" else 3
PUBLISHED_HEAD = "AngelSlim/Qwen3-1.7B_eagle3"   # used only by the "with a network" cell
""")
code("""
import json
import sys
from pathlib import Path

PROTOTYPE = Path("../build/eagle3-prototype").resolve()   # the prototype package; `utils/` once integrated
sys.path.insert(0, str(PROTOTYPE))

from eagle3.settings import OFFLINE_MAIN, get_settings, stage_folders

settings = get_settings(PRESET)
main = OFFLINE_MAIN
folders = stage_folders(settings, main)
print(f"main: {main.openvino.name} (+ {main.hf.name})\\npreset: {settings.name}")
print("everything this notebook builds goes to:", folders.head.parent)
""")

md("""
## 1. What the head reads

A draft model re-reads the text and guesses the next token from scratch. The main model, though, has already
understood the text: its hidden states at every layer say a lot about what comes next. An EAGLE-3 head reads them.
OpenVINO GenAI taps three of the main's decoder layers, an early, a middle and a late one, **{2, N/2, N−3}** for a
main of N layers (it refuses mains with fewer than 10). What it taps is each layer's output after its MLP's residual
add: in Hugging Face terms `hidden_states[i + 1]` (index 0 is the embedding output).

At position *t* the head gets
1. the three tapped states at *t*, concatenated (3 × hidden) and fused by a linear layer `fc` to one hidden state;
2. the embedding of the **next** token *t + 1* (the main's own embedding: GenAI copies it into the head);

each is RMS-normalised, the two are concatenated (2 × hidden), and one Llama decoder layer predicts token *t + 2*.
To draft further it feeds its **own** output state back in place of the fused one, beside the embedding of the token
it just drafted. GenAI even moves `fc` into the main model, so the main hands over the fused state directly.
""")
code("""
from eagle3.checks import check_main
from eagle3.hidden import hidden_state_indices, tapped_layers

main_config = check_main(main.hf)
layers = main_config["num_hidden_layers"]
print(f"{main.hf.name}: {layers} layers, hidden {main_config['hidden_size']}")
print("layers GenAI taps:", tapped_layers(layers), "= Hugging Face hidden_states", hidden_state_indices(layers))
""")
code("""
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(main.hf)
hf_main = AutoModelForCausalLM.from_pretrained(main.hf, dtype=torch.float32)
ids = tokenizer("def fibonacci(n):", return_tensors="pt").input_ids
with torch.inference_mode():
    out = hf_main(ids, output_hidden_states=True)
fused_input = torch.cat([out.hidden_states[i] for i in hidden_state_indices(layers)], dim=-1)
print("tokens:", ids.shape[1], "| one tapped state:", tuple(out.hidden_states[3].shape),
      "| what fc reads:", tuple(fused_input.shape))
""")

md("""
## 2. Why it is cheap

One decoder layer instead of a model, and an output layer over a **draft vocabulary**: only the target ids the
main writes most often (8,192 of SmolLM2's 49,152 here). The head outputs draft ids; `d2t` maps them back:
target id = draft id + `d2t[draft id]`. A tiny example first:
""")
code("""
from eagle3.vocab import draft_vocabulary

toy = draft_vocabulary([7, 7, 7, 3, 3, 9, 1], size=3, vocab_size=10)
print("kept target ids:", toy.target_ids.tolist(), "| d2t:", toy.d2t().tolist(),
      "| t2d:", toy.t2d().astype(int).tolist(), f"| coverage {toy.coverage:.2f}")
assert (toy.d2t() + range(3)).tolist() == toy.target_ids.tolist()
""")
code("""
from eagle3.head import Eagle3Head, shape_from_main_config

shape = shape_from_main_config(main_config, settings.draft_vocab_size, settings.intermediate_size)
random_head = Eagle3Head(shape)
main_parameters = sum(p.numel() for p in hf_main.parameters())
print(f"head: {random_head.parameter_count() / 1e6:.1f} M parameters (without the shared embedding), "
      f"main: {main_parameters / 1e6:.1f} M")
for name, module in [("fc", random_head.fc), ("q_proj", random_head.midlayer.self_attn.q_proj),
                     ("lm_head", random_head.lm_head)]:
    print(f"  {name:8s} {tuple(module.weight.shape)}")
""")

md("""
## 3. The folder format

optimum-intel exports a head in the layout of [SpecForge](https://github.com/sgl-project/SpecForge):
`config.json` with `architectures: ["LlamaForCausalLMEagle3"]`, `model_type: llama`, `target_hidden_size` (the
main's width), `vocab_size` (the main's), `draft_vocab_size`, `tie_word_embeddings: false`; weights `midlayer.*`,
`fc`, `norm`, `lm_head`, `d2t` (int64) and `t2d` (bool, unused by GenAI); and the **main's tokenizer files**:
`draft_model()` builds the head's tokenizer from its folder, and draft and main must share one. We save the
untrained head that way (written to a temporary folder and renamed when complete):
""")
code("""
from eagle3.folder import save_head_folder

random_dir = folders.head.with_name(folders.head.name.replace(settings.name, "random"))
save_head_folder(random_head, main.hf, random_dir, {"stage": "random head", "preset": settings.name})
print(random_dir.name, sorted(p.name for p in random_dir.iterdir()))
print(json.dumps({k: json.loads((random_dir / "config.json").read_text())[k]
                  for k in ("architectures", "hidden_size", "target_hidden_size", "vocab_size", "draft_vocab_size")}))
""")

md("""
## 4. Export with `optimum-cli`

The same command as for any model, with `--trust-remote-code` (optimum-intel swaps in its own modelling file for
the head) and `--task text-generation-with-past`. That file imports `einops` and `diffusers`, which transformers
checks; the prototype installs them into a folder of its own (`build/eagle3-prototype/site`) used only here.
The export writes `eagle3_mode` into the model's runtime info: that is how GenAI knows to run it as EAGLE-3.
""")
code("""
import os
import subprocess

random_ov = random_dir.with_name(random_dir.name.replace("-hf", "-fp16-ov"))
command = ["optimum-cli", "export", "openvino", "--model", str(random_dir), "--task", "text-generation-with-past",
           "--trust-remote-code", "--weight-format", "fp16", str(random_ov)]
print(" ".join(command))
env = dict(os.environ, PYTHONPATH=str(PROTOTYPE / "site"))
done = subprocess.run(command, env=env, capture_output=True, text=True)
assert done.returncode == 0, done.stderr[-2000:]
""")
code("""
import openvino as ov

exported = ov.Core().read_model(random_ov / "openvino_model.xml")
print("eagle3_mode in runtime info:", exported.has_rt_info("eagle3_mode"),
      "| inputs:", [i.get_any_name() for i in exported.inputs])
assert exported.has_rt_info("eagle3_mode")
""")

md("""
## 5. Run it with OpenVINO GenAI

`openvino_genai.draft_model(head_dir, device)` plus a `SchedulerConfig` (EAGLE-3 runs on the continuous-batching
backend). The main runs as the **exact f32 main** of notebook 02: f32 compute, no dynamic quantisation, f32 KV cache;
under it, speculative output must equal plain greedy output token for token, whatever the head guesses.
""")
code("""
import openvino_genai

EXACT_MAIN = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0", "KV_CACHE_PRECISION": "f32"}
scheduler = openvino_genai.SchedulerConfig()
scheduler.cache_size = 1                   # GB of KV cache
scheduler.max_num_batched_tokens = 4096    # more than any prompt (a small budget broke exactness, notebook 05)
""")
code("""
draft = openvino_genai.draft_model(str(random_ov), DEVICE, INFERENCE_PRECISION_HINT="f32")
eagle_pipe = openvino_genai.LLMPipeline(str(main.openvino), DEVICE, scheduler_config=scheduler, draft_model=draft,
                                        **EXACT_MAIN)
plain_pipe = openvino_genai.LLMPipeline(str(main.openvino), DEVICE, scheduler_config=scheduler, **EXACT_MAIN)
""")
code("""
prompt = "Write a Python function that returns the first n Fibonacci numbers as a list."
plain_config = openvino_genai.GenerationConfig(max_new_tokens=48)
chain_config = openvino_genai.GenerationConfig(max_new_tokens=48, num_assistant_tokens=ASSISTANT_TOKENS)
plain_text = plain_pipe.generate(prompt, plain_config)
eagle_result = eagle_pipe.generate([prompt], chain_config)
print(eagle_result.texts[0])
assert eagle_result.texts[0] == str(plain_text), "EAGLE-3 under the exact main must equal plain greedy output"
metrics = eagle_result.extended_perf_metrics
print("drafted tokens the main accepted (random head):", metrics.get_num_accepted_tokens())
""")
code("""
del eagle_pipe, plain_pipe, draft
""")

md("""
## 6. Train a head for the offline main

The random head is lossless but useless: it guesses nothing. Training needs four things, each a stage of the
`eagle3` package (each builds a folder atomically and is reused when its recipe is unchanged):

1. **data the main writes itself:** prompts it samples after its chat template's user tag (most started by a task
   opener), each answered greedily, batched on the continuous-batching pipeline (as in notebook 06). The course's
   benchmark prompts are held out.
2. **the tapped states:** one prefill of the main per batch of samples, with the three tapped layers added as
   outputs of its OpenVINO model, under the exact f32 main; the label at each position is the main's own greedy
   choice there (what the main will accept), not the text's token.
3. **the draft vocabulary:** the `draft_vocab_size` most frequent labels, and `d2t`/`t2d`.
4. **the training-time unroll** ("training-time test", EAGLE-3's key idea): at inference the head's second guess
   reads its *own* first output. Trained only on the main's states it would never have seen one, so each batch is
   unrolled 3 steps; step *j* predicts the token *j + 2* ahead, its query sees step 0's keys at earlier positions and
   its own chain's keys, exactly like the chain at inference; the loss is Σ 0.8^j × cross-entropy_j.
""")
code("""
from eagle3.course import benchmark_prompts
from eagle3.data import load_samples, write_training_data

held_out = benchmark_prompts()
write_training_data(main.openvino, settings, folders.data, [p.text for p in held_out])
samples = load_samples(folders.data)
stats = json.loads((folders.data / "generation_stats.json").read_text())
print(f"{len(samples)} samples, {stats['sequence_tokens']} tokens, written in {stats['seconds']:.0f} s")
for sample in samples[:3]:
    print(f"  [{sample.task}] {sample.user_text[:100]!r} -> {sample.answer_tokens} answer tokens")
""")
code("""
from eagle3.hidden import load_tapped, write_tapped_states

write_tapped_states(main.openvino, folders.data, folders.hidden, settings.sequence_length)
data = load_tapped(folders.hidden, mmap=False)
print(f"{len(data.tokens)} positions, fused input {data.hidden.shape[1]} wide (float16)")
""")
code("""
vocab = draft_vocabulary(data.targets, settings.draft_vocab_size, main_config["vocab_size"],
                         always_keep=[main_config["eos_token_id"]])
print(f"draft vocabulary: {vocab.size} ids cover {vocab.coverage:.1%} of the main's greedy choices")
""")
code("""
from eagle3.head import load_main_embedding
from eagle3.train import init_from_main, train_head

head = Eagle3Head(shape)
init_from_main(head, load_main_embedding(main.hf), vocab)   # main's embedding (frozen); lm_head from its rows
history = train_head(head, data, vocab, settings, log=lambda line: None)
final = history.validation[-1]
print(f"{history.seconds / 60:.1f} min, {history.epochs_done:.1f} epochs")
print("validation: share of chains that get 1, 2, 3 drafted tokens right:",
      [round(x, 3) for x in final["answer_chain_accuracy"]])
""")
code("""
import matplotlib.pyplot as plt

fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
ax[0].plot(history.steps, history.losses)
ax[0].set(xlabel="step", ylabel="unrolled loss", title="training")
for j in range(settings.unroll_steps):
    ax[1].plot([v["step"] for v in history.validation], [v["answer_chain_accuracy"][j] for v in history.validation],
               marker="o", label=f"{j + 1} token(s) right")
ax[1].set(xlabel="step", ylabel="share of held-out positions", title="validation (answers)")
ax[1].legend()
plt.show()
""")
code("""
from eagle3.export import export_head

recipe = {"stage": "eagle3-head", "settings": settings.as_dict(), "data": stats,
          "validation": final, "vocab_coverage": vocab.coverage}
save_head_folder(head, main.hf, folders.head, recipe)
export_head(folders.head, folders.exported, settings.weight_format, PROTOTYPE / "site")   # prints the command
""")

md("""
## 7. Measure it beside plain decoding

Same prompts (the held-out benchmark set), same `max_new_tokens`, a warm-up, then plain and EAGLE-3 interleaved
`REPEATS` times, medians kept. `compare` asserts identical output per prompt. Per prompt: tokens per main pass (the
complete verification passes), c = one head step / one plain main step, speed-up.
""")
code("""
from eagle3.evaluate import compare, generation_config, load_eagle3, load_plain, summarise, table_text

plain = load_plain(main.openvino)
eagle = load_eagle3(main.openvino, folders.exported)   # checks the export (eagle3_mode, tokenizer, sizes) first
results = compare(plain, eagle, held_out, generation_config(MAX_NEW_TOKENS, ASSISTANT_TOKENS), MAX_NEW_TOKENS,
                  REPEATS)
del plain, eagle
summary = summarise(results)
print(table_text([r.as_dict() for r in results], ["prompt_id", "task", "tokens", "tokens_per_pass", "c", "speedup",
                                                  "identical"]))
print(json.dumps(summary["all"], indent=1))
assert all(r.identical for r in results)
""")

md("""
### Leviathan's formula beside the measurement

With per-token acceptance *a* (solved from the measured tokens per pass at K), draft length K and cost ratio c, the
predicted speed-up is (1 − a^(K+1)) / ((1 − a)(K·c + 1)). It assumes a verification pass costs one main step; on this
CPU checking K + 1 = 4 tokens costs a little more (notebook 05), so the prediction is an upper bound.
""")
code("""
from scipy.optimize import brentq

def expected_tokens(a, k):
    return (1 - a ** (k + 1)) / (1 - a) if a < 1 else k + 1

def predicted_speedup(a, k, c):
    return expected_tokens(a, k) / (k * c + 1)

rows = []
for task, block in summary["by_task"].items():
    tpp = block["tokens_per_pass"]
    a = brentq(lambda x: expected_tokens(x, ASSISTANT_TOKENS) - tpp, 1e-6, 1 - 1e-6) if tpp and tpp > 1 else 0.0
    rows.append({"task": task, "tokens per pass": tpp, "a": a, "c": block["c"],
                 "predicted": predicted_speedup(a, ASSISTANT_TOKENS, block["c"]), "measured": block["speedup"]})
print(table_text(rows, ["task", "tokens per pass", "a", "c", "predicted", "measured"]))
""")

md("""
## 8. Chain mode and tree mode, and the KV-cache trap

Chain mode (`num_assistant_tokens`) drafts one line of K tokens. Tree mode (`branching_factor`, `tree_depth`)
drafts the head's top-`branching_factor` choices at each of `tree_depth` levels and verifies the whole tree in one
main pass, so a wrong first guess need not waste the step. Verifying a tree writes KV-cache entries for branches
that are then thrown away, and GenAI's default KV cache is stored in reduced precision (bf16 or u8 depending on the
CPU): on our Xeon with AMX that changed 10 of 10 outputs into broken text. With `KV_CACHE_PRECISION=f32` (part of
the exact main) every output was identical again. Always check tree mode's output against plain output.
""")
code("""
from eagle3.evaluate import tree_trap

trap = tree_trap(main.openvino, folders.exported, held_out, MAX_NEW_TOKENS, branching_factor=2, tree_depth=3)
for label in ("default_kv_cache", "kv_cache_f32"):
    print(f"{label:17s}: {len(trap[label]['differing'])} of {trap[label]['of']} outputs differ from plain greedy; "
          f"tokens per pass {trap[label]['tokens_per_pass']}")
assert not trap["kv_cache_f32"]["differing"], "with an f32 KV cache tree mode must stay lossless"
""")

md("""
## 9. Bad input fails in a second

Each check runs before any long work and says what to do:
""")
code("""
import shutil
import tempfile

from eagle3.checks import check_exported_head, check_head_folder, check_head_matches_main, check_main
from eagle3.settings import Eagle3Error

scratch = Path(tempfile.mkdtemp())
def show(check, *args):
    try:
        check(*args)
        print("accepted")
    except Eagle3Error as error:
        print("Eagle3Error:", error)

no_tokenizer = scratch / "no-tokenizer"
shutil.copytree(folders.head, no_tokenizer, ignore=shutil.ignore_patterns("tokenizer*", "*.jinja"))
show(check_head_folder, no_tokenizer)

wrong_width = scratch / "wrong-width"
shutil.copytree(folders.head, wrong_width)
config = json.loads((wrong_width / "config.json").read_text())
(wrong_width / "config.json").write_text(json.dumps(config | {"target_hidden_size": 1536}))
show(check_head_matches_main, wrong_width, main.openvino)

coder_main = Path("../models/qwen2.5-coder-1.5b-instruct-int4-ov")
if coder_main.exists():
    show(check_head_matches_main, folders.head, coder_main)      # another main: width and vocabulary differ

shallow = scratch / "shallow-main"
shallow.mkdir()
(shallow / "config.json").write_text(json.dumps(main_config | {"num_hidden_layers": 8}))
show(check_main, shallow)

show(check_exported_head, main.openvino)                         # an ordinary model: no eagle3_mode
shutil.rmtree(scratch)
""")

md("""
## 10. With a network: a published head

Heads trained on GPUs for bigger mains are on the Hugging Face hub (e.g. `AngelSlim/Qwen3-1.7B_eagle3` for
Qwen3-1.7B). The same `optimum-cli` command exports them; offline this cell fails fast with a clear message.

**Other drafts GenAI runs.** OpenVINO GenAI 2026.4 also runs *DFlash* drafts (a block-diffusion draft that proposes
several tokens in one pass, conditioned on the main's hidden states; optimum-intel exports them with the same
`--trust-remote-code` route) and the *multi-token-prediction* (MTP) heads that ship inside Gemma-4 checkpoints. Both
plug in through the same `draft_model(...)` + `LLMPipeline(..., draft_model=...)` calls; we do not build them here.
""")
code("""
from huggingface_hub import snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError

try:
    published = snapshot_download(PUBLISHED_HEAD, etag_timeout=5)
    print("downloaded", published, "- export it with:")
    print(f"optimum-cli export openvino --model {published} --task text-generation-with-past --trust-remote-code "
          "--weight-format fp16 <folder>")
except (OSError, LocalEntryNotFoundError) as error:
    print(f"No network to the Hugging Face hub ({type(error).__name__}): skipped. The offline head above is the "
          "course's own.")
""")

md("""
## Summary

- An EAGLE-3 head is one decoder layer over (the main's fused tapped states, the next token's embedding) with a
  reduced output vocabulary: a few percent of a main step.
- Its folder is SpecForge's layout plus the main's tokenizer; `optimum-cli ... --trust-remote-code` exports it and
  marks it `eagle3_mode`; `openvino_genai.draft_model` runs it.
- Trained on the main's own greedy answers with a 3-step training-time unroll, every output stays identical under
  the exact main; how much faster it gets depends on how well trained the head is (check your own figures above);
  tree mode needs an f32 KV cache.

## Exercises
1. Train with `unroll_steps=1` (`get_settings(PRESET, unroll_steps=1)`). Which validation accuracies drop, and how
   does the chain's tokens per pass change?
2. Halve `draft_vocab_size`. How do coverage, c and the speed-up move?
3. Solve the formula for the acceptance a head would need to reach 1.5x at the c measured above.

<details><summary>Solutions</summary>

1. Step 0 stays about the same; the later steps fall because the head never saw its own outputs; tokens per pass
   falls towards 1 + a.
2. Coverage falls slightly, c falls a little (the output layer is part of the step), the speed-up barely moves.
3. Solve (1 − a^(K+1)) / ((1 − a)(Kc + 1)) = 1.5 for a with `brentq`, as in section 7.
</details>
""")

nb = new_notebook(cells=cells, metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                         "name": "python3"}})
nbformat.write(nb, str(__import__("pathlib").Path(__file__).resolve().parent / "08-eagle3-draft-heads.ipynb"))
print(len(cells), "cells")
