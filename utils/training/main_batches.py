"""Driving the main model in batches, for the data of both home-made drafts: generation and teacher-forced prefills.

Notebook 06's draft (`utils.training.draft_data`) and notebook 08's EAGLE-3 head
(`utils.training.eagle3_data`, `utils.training.eagle3_hidden`) learn from what the
main model writes and computes, so they drive it the same way, defined once here:

- generation on OpenVINO GenAI's continuous-batching pipeline: `data_pipeline` (its
  scheduler), `generation_config` (greedy or sampled), `run_batched` (many requests,
  a bounded number in flight, with a progress bar); `text_token_ids` for the inputs;
- teacher-forced passes of the main's OpenVINO model over many sequences at once:
  `length_batches` groups sequences of similar length under a token budget and
  `padded_prefills` runs one prefill per padded batch (the caller reads its outputs).

Heavy imports (openvino, openvino_genai, tqdm) happen inside functions.
"""
from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# The data pipelines' scheduler: one bounded KV cache (GB), reserved once, and a budget of tokens per step that
# lets dynamic split-fuse mix long prefills with the running sequences.
DATA_CACHE_SIZE_GB = 1
DATA_BATCHED_TOKENS = 2048
SAMPLING_TOP_P = 0.95


def text_token_ids(tokenizer: Any, text: str) -> list[int]:
    """The token ids of `text` from an OpenVINO GenAI tokenizer, adding no special tokens (a chat template has them)."""
    return [int(token) for token in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]


def data_pipeline(main_ov_dir: Path, concurrent_sequences: int, device: str = "CPU") -> Any:
    """A `ContinuousBatchingPipeline` of the main that runs up to `concurrent_sequences` sequences together."""
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.cache_size = DATA_CACHE_SIZE_GB
    scheduler.max_num_seqs = concurrent_sequences
    scheduler.max_num_batched_tokens = DATA_BATCHED_TOKENS
    scheduler.dynamic_split_fuse = True
    return openvino_genai.ContinuousBatchingPipeline(str(main_ov_dir), scheduler, device, {})


def generation_config(end_id: int, max_new_tokens: int, temperature: float | None = None, seed: int = 0) -> Any:
    """A `GenerationConfig` that stops at `end_id`: greedy when `temperature` is None, else sampled (top-p 0.95,
    `seed`)."""
    import openvino_genai

    generation = openvino_genai.GenerationConfig()
    generation.max_new_tokens = max_new_tokens
    generation.eos_token_id = end_id
    generation.stop_token_ids = {end_id}
    generation.do_sample = temperature is not None
    if temperature is not None:
        generation.temperature = temperature
        generation.top_p = SAMPLING_TOP_P
        generation.rng_seed = seed
    return generation


def _tensor(ids: Sequence[int]) -> Any:
    import numpy as np
    import openvino as ov

    return ov.Tensor(np.asarray([ids], dtype=np.int64))


def run_batched(pipeline: Any, requests: Sequence[tuple[list[int], Any]], description: str,
                show_progress: bool = True, in_flight: int | None = None) -> tuple[list[list[int]], float]:
    """Generate for every (input ids, GenerationConfig) on a ContinuousBatchingPipeline.

    At most `in_flight` requests are queued at a time (None: all at once), a new one as each finishes; the
    scheduler runs up to `max_num_seqs` of them together. (Queueing several hundred at once made the scheduler
    keep admitting prompts while the running ones crawled: ten times slower here.) Tokens are streamed from each
    request's handle after every step, so the progress bar shows finished requests and the true generation
    throughput. Returns the generated ids per request and the wall time.
    """
    import openvino_genai
    from tqdm.auto import tqdm

    limit = len(requests) if in_flight is None else max(1, int(in_flight))
    outputs: list[list[int]] = [[] for _ in requests]
    active: dict[int, Any] = {}
    queued = 0
    generated = 0
    started = time.perf_counter()
    running = openvino_genai.GenerationStatus.RUNNING
    with tqdm(total=len(requests), desc=description, unit="req", disable=not show_progress) as progress:
        while queued < len(requests) or active:
            while queued < len(requests) and len(active) < limit:
                ids, config = requests[queued]
                active[queued] = pipeline.add_request(queued, _tensor(ids), config)
                queued += 1
            if pipeline.has_non_finished_requests():
                pipeline.step()
            finished = 0
            for index, handle in list(active.items()):
                while handle.can_read():
                    for output in handle.read().values():  # read() hands out the tokens new since the last read
                        outputs[index] += [int(token) for token in output.generated_ids]
                        generated += len(output.generated_ids)
                if handle.get_status() != running and not handle.can_read():
                    del active[index]
                    finished += 1
            if not pipeline.has_non_finished_requests() and active and not finished:
                break  # nothing left to run: requests that never started (should not happen)
            progress.update(finished)
            progress.set_postfix_str(f"{generated} tokens, {generated / (time.perf_counter() - started):.0f} tokens/s",
                                     refresh=False)
    return outputs, time.perf_counter() - started


def length_batches(lengths: Sequence[int], batch_tokens: int, shuffle_seed: int | None = None) -> list[list[int]]:
    """Indices grouped by similar length so that a padded batch holds at most `batch_tokens` positions (a longer
    sequence stands alone), shortest first; with `shuffle_seed`, the batches in a shuffled order (long and short
    mixed, so that a progress bar's rate means something)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        longest = max([lengths[i] for i in current] + [lengths[index]])
        if current and longest * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(batches)
    return batches


def padded_prefills(request: Any, sequences: Sequence[Sequence[int]],
                    batches: Sequence[Sequence[int]]) -> Iterator[Sequence[int]]:
    """Run one prefill of a stateful main model's infer `request` per batch of indices into `sequences` (from
    `length_batches`) and yield the batch.

    Each batch is right-padded with an attention mask and positions 0, 1, ...; the request's state is reset first,
    so every sequence starts fresh. The caller reads the outputs it needs (logits, extra outputs) from `request` for
    rows `0..len(batch) - 1`, positions `0..len(sequences[index]) - 1`, before the next batch.
    """
    import numpy as np

    lengths = [len(sequence) for sequence in sequences]
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        ids = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros((len(batch), longest), dtype=np.int64)
        for row, index in enumerate(batch):
            ids[row, :lengths[index]] = sequences[index]
            mask[row, :lengths[index]] = 1
        positions = np.broadcast_to(np.arange(longest, dtype=np.int64), ids.shape).copy()
        request.reset_state()
        request.infer({"input_ids": ids, "attention_mask": mask, "position_ids": positions,
                       "beam_idx": np.arange(len(batch), dtype=np.int32)})
        yield batch
