"""The byte corpus: deterministic split and batches, clear errors for bad paths and sizes."""

from __future__ import annotations

import pytest
import torch

from hymo_mini.data import ByteCorpus, DataError, decode, encode, load_corpus


@pytest.fixture
def text_dir(tmp_path):
    for i in range(40):
        sub = tmp_path / f"pkg{i % 3}"
        sub.mkdir(exist_ok=True)
        (sub / f"mod{i:02d}.py").write_text(f"# file {i}\n" + "def f(x):\n    return x\n" * 20)
    (tmp_path / "notes.txt").write_text("not python\n")
    return tmp_path


def test_split_is_by_file_and_deterministic(text_dir):
    a = load_corpus(text_dir, val_percent=25)
    b = load_corpus(text_dir, val_percent=25)
    assert torch.equal(a.train, b.train) and torch.equal(a.val, b.val)
    assert a.n_files == 40  # the .txt file does not match *.py
    assert a.train.numel() > 0 and a.val.numel() > 0
    assert a.train.numel() + a.val.numel() == sum(
        p.stat().st_size for p in text_dir.rglob("*.py"))
    # a file is wholly on one side: every file's header appears in exactly one split
    train_text, val_text = decode(a.train), decode(a.val)
    for i in range(40):
        header = f"# file {i}\n"
        assert (header in train_text) != (header in val_text)


def test_adding_files_does_not_move_old_ones(text_dir):
    before = decode(load_corpus(text_dir, val_percent=25).val)
    (text_dir / "zzz_new.py").write_text("# brand new\n" * 5)
    after = decode(load_corpus(text_dir, val_percent=25).val)
    for i in range(40):
        header = f"# file {i}\n"
        assert (header in before) == (header in after)


def test_single_file_splits_the_stream(tmp_path):
    path = tmp_path / "one.txt"
    path.write_bytes(bytes(range(256)) * 4)
    corpus = load_corpus(path, val_percent=10)
    assert corpus.train.numel() + corpus.val.numel() == 1024
    assert corpus.val.numel() == 1024 - int(1024 * 0.9)
    assert torch.equal(torch.cat([corpus.train, corpus.val]),
                       torch.tensor(list(bytes(range(256)) * 4), dtype=torch.uint8))


def test_max_bytes_caps_the_corpus(text_dir):
    corpus = load_corpus(text_dir, max_bytes=1000)
    assert corpus.train.numel() + corpus.val.numel() == 1000


def test_batches_are_windows_and_a_function_of_the_step(text_dir):
    corpus = load_corpus(text_dir)
    x = corpus.batch(step=3, batch_size=4, seq_len=16, seed=7)
    assert x.shape == (4, 17) and x.dtype == torch.long
    assert torch.equal(x, corpus.batch(step=3, batch_size=4, seq_len=16, seed=7))
    assert not torch.equal(x, corpus.batch(step=4, batch_size=4, seq_len=16, seed=7))
    assert not torch.equal(x, corpus.batch(step=3, batch_size=4, seq_len=16, seed=8))
    stream = bytes(corpus.train.tolist())
    for row in x:
        assert bytes(row.tolist()) in stream  # a contiguous slice of the training text
    val = corpus.val_batches(2, 3, 16)
    assert len(val) == 2 and all(v.shape == (3, 17) for v in val)
    assert all(torch.equal(a, b) for a, b in zip(val, corpus.val_batches(2, 3, 16), strict=True))


def test_stdlib_corpus_needs_no_download():
    corpus = load_corpus(max_bytes=200_000)
    assert corpus.source == "Python standard library"
    assert corpus.train.numel() + corpus.val.numel() == 200_000
    assert corpus.val.numel() > 0
    assert "import" in decode(corpus.train[:50_000])


def test_encode_decode_round_trip():
    text = "héllo, wörld — ∑"
    assert decode(encode(text)) == text
    assert encode(text).numel() == len(text.encode("utf-8"))
    assert decode([0xFF]) == "\ufffd"  # invalid UTF-8 is replaced, not an exception


def test_bad_paths_are_clear_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_corpus(tmp_path / "missing")
    with pytest.raises(DataError, match="no files matching"):
        load_corpus(tmp_path)  # an empty folder
    (tmp_path / "empty.py").write_text("")
    with pytest.raises(DataError, match="all empty"):
        load_corpus(tmp_path)


def test_bad_sizes_are_clear_errors(text_dir):
    corpus = load_corpus(text_dir)
    with pytest.raises(DataError, match="seq_len"):
        corpus.batch(0, 2, corpus.train.numel() + 5)
    with pytest.raises(DataError, match="batch_size"):
        corpus.batch(0, 0, 8)
    with pytest.raises(DataError, match="split"):
        corpus.batch(0, 2, 8, split="test")
    with pytest.raises(DataError, match="empty list"):
        load_corpus([])
    with pytest.raises(DataError, match="val_percent"):
        load_corpus(text_dir, val_percent=0)
    with pytest.raises(DataError, match="uint8"):
        ByteCorpus(torch.zeros(3), torch.zeros(3, dtype=torch.uint8), 1, "x")


def test_to_device_keeps_the_batches(text_dir):
    corpus = load_corpus(text_dir)
    moved = corpus.to("cpu")
    assert torch.equal(moved.batch(5, 3, 16, seed=2), corpus.batch(5, 3, 16, seed=2))
    assert moved.n_files == corpus.n_files and moved.source == corpus.source


def test_corpus_digest_names_the_text_and_its_paths(tmp_path):
    from hymo_mini.data import corpus_digest

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.rst.txt").write_text("one")
    (tmp_path / "y.rst.txt").write_text("two")
    first = corpus_digest(tmp_path, "*.rst.txt")
    assert first == corpus_digest(tmp_path, "*.rst.txt") and len(first) == 64
    (tmp_path / "y.rst.txt").rename(tmp_path / "z.rst.txt")  # same bytes, another name
    assert corpus_digest(tmp_path, "*.rst.txt") != first
