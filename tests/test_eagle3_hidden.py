"""What an EAGLE-3 head reads, for real: the offline main's tapped hidden states and greedy labels.

`eagle3_hidden.tap_hidden_states` prefills the exact f32 main (OpenVINO, fp16 weights) in padded batches and stores
the three tapped layers as float16; here they are compared with what transformers computes for the same layers
(`output_hidden_states=True`, the Hugging Face folder the export was made from, its weights rounded to fp16 like the
export's), and `write_tapped_states` is run on a small data folder.
"""
from __future__ import annotations

import numpy as np

from utils.training.eagle3_hidden import hidden_state_indices, load_tapped, tap_hidden_states, write_tapped_states
from utils.training.eagle3_settings import Eagle3Settings
from utils.training.scaffold import MainModel

# Lengths 6, 13 and 1 (SmolLM2's tokenizer): with a 16-token budget two batches, one of them padded.
PROMPTS = ("def fibonacci(n):", "The capital of France is Paris, and the capital of Italy is", "Hi")
BATCH_TOKENS = 16
# The taps are stored as float16: a relative rounding of up to 2**-11 (SmolLM2 has activations over 20,000, so
# that is several units there). Twice that, plus a small absolute term for f32 arithmetic done in another order
# (measured: 1e-4 beyond the storage rounding); the neighbouring layers differ by more than 10.
RELATIVE_TOLERANCE = 2 ** -10
ABSOLUTE_TOLERANCE = 2e-3
TIED_MARGIN = 1e-3  # logits whose top two are closer than this may swap between the two computations


def reference_main(hf_dir):
    """The main in transformers, f32 compute, its weights rounded to fp16 as the fp16 OpenVINO export stores them."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).half().float().eval()


def test_tapped_states_are_the_mains_hidden_states_at_the_tapped_layers(offline_pair) -> None:
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(offline_pair.hf)
    sequences = [tokenizer(text).input_ids for text in PROMPTS]
    assert len({len(s) for s in sequences}) == len(sequences), "prompts of different lengths: the batches are padded"
    data, stats = tap_hidden_states(offline_pair.main, sequences, batch_tokens=BATCH_TOKENS, show_progress=False)

    lengths = [len(s) for s in sequences]
    assert data.offsets.tolist() == [0, *np.cumsum(lengths).tolist()]
    assert data.tokens.tolist() == [token for s in sequences for token in s]
    assert data.hidden.dtype == np.float16 and data.targets.dtype == np.int32
    assert stats["positions"] == sum(lengths) and stats["samples"] == len(sequences)

    main = reference_main(offline_pair.hf)
    layers = main.config.num_hidden_layers
    width = main.config.hidden_size
    indices = hidden_state_indices(layers)
    assert data.hidden.shape == (sum(lengths), 3 * width)
    for number, sequence in enumerate(sequences):
        with torch.inference_mode():
            out = main(torch.tensor([sequence]), output_hidden_states=True)
        assert len(out.hidden_states) == layers + 1
        start, end = data.offsets[number], data.offsets[number + 1]
        tapped = data.hidden[start:end].astype(np.float32)
        for tap, index in enumerate(indices):
            got = tapped[:, tap * width:(tap + 1) * width]
            expected = out.hidden_states[index][0].numpy()
            difference = np.abs(got - expected)
            beyond_storage = float((difference - np.abs(expected) * 2 ** -11).max())
            print(f"prompt {number}, hidden_states[{index}]: max |difference| {difference.max():.4g} "
                  f"(largest value {np.abs(expected).max():.4g}), beyond the float16 rounding {beyond_storage:.2g}")
            np.testing.assert_allclose(got, expected, rtol=RELATIVE_TOLERANCE, atol=ABSOLUTE_TOLERANCE,
                                       err_msg=f"prompt {number}: tap {tap} is not hidden_states[{index}]")
            for neighbour in (index - 1, index + 1):  # the tolerance tells adjacent layers apart
                assert not np.allclose(got, out.hidden_states[neighbour][0].numpy(), rtol=RELATIVE_TOLERANCE,
                                       atol=ABSOLUTE_TOLERANCE)
        # the labels: the main's greedy choice at every position
        top_two = out.logits[0].topk(2).values
        decided = ((top_two[:, 0] - top_two[:, 1]) > TIED_MARGIN).numpy()
        assert decided.mean() > 0.5
        greedy = out.logits[0].argmax(-1).numpy()
        assert (data.targets[start:end][decided] == greedy[decided]).all(), f"prompt {number}: labels differ"


def test_write_tapped_states_cuts_the_samples_and_is_reused(offline_pair, tmp_models_dir) -> None:
    from utils.models.atomic_folder import atomic_folder, read_marker
    from utils.training.eagle3_settings import eagle3_folders
    from utils.training.scaffold import Sample, save_samples

    main = MainModel(offline_pair.main, offline_pair.hf)
    settings = Eagle3Settings.preset("quick", sequence_length=8)
    samples = [Sample(0, "code", "", "greedy", "a", [1, 504, 28, 9023, 28, 1206, 2, 1, 9690, 198, 2], 1, 9),
               Sample(1, "chat", "", "greedy", "b", [1, 504, 28, 30, 2], 1, 3)]
    folders = eagle3_folders(settings, main)
    with atomic_folder(folders.data, {"stage": "data written by this test"}) as work:
        save_samples(samples, work, {"samples": len(samples)})

    folder = write_tapped_states(settings, main, show_progress=False)
    assert folder == folders.hidden
    data = load_tapped(folder)
    assert data.offsets.tolist() == [0, 8, 13]  # the first sample cut to sequence_length
    assert data.tokens.tolist() == samples[0].token_ids[:8] + samples[1].token_ids
    assert data.answer_starts.tolist() == [8, 3]  # an answer start beyond the cut moves to the cut
    assert data.hidden.shape == (13, 3 * 576) and np.isfinite(data.hidden).all()
    # padded together or each alone in its batch (a budget of 1 token), the states are the same
    alone, _ = tap_hidden_states(main.openvino, [samples[0].token_ids[:8], samples[1].token_ids], batch_tokens=1,
                                 show_progress=False)
    np.testing.assert_allclose(data.hidden.astype(np.float32), alone.hidden.astype(np.float32),
                               rtol=RELATIVE_TOLERANCE, atol=ABSOLUTE_TOLERANCE)
    assert data.targets.tolist() == alone.targets.tolist()

    marker = read_marker(folder)
    assert write_tapped_states(settings, main, show_progress=False) == folder
    assert read_marker(folder) == marker, "an up-to-date folder is reused, not rebuilt"
    longer = Eagle3Settings.preset("quick", sequence_length=16)
    write_tapped_states(longer, main, show_progress=False)
    assert load_tapped(folder).offsets.tolist() == [0, 11, 16], "another sequence length rebuilds the folder"

