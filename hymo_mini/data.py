"""Training data with no download: bytes of text files already on the machine.

The tiny HyMo's vocabulary is the 256 byte values, so any file is a token stream with no
tokenizer. By default the corpus is the Python standard library's own ``.py`` files
(several megabytes of real, varied text on every machine with Python); any files or
folders can be passed instead.

Determinism:

* Files are read in sorted order of their path relative to the root they were found under.
* Each file goes to validation or training by a stable hash of that relative path
  (``val_percent`` of files go to validation). A file's side does not depend on which
  other files exist, so adding files never moves old ones across the split.
* Batch ``step`` draws its windows from a generator seeded with ``(seed, step)``: the
  batch is a pure function of the step, so a resumed run sees the batches it would have
  seen without the interruption.

Note: the standard library differs between Python versions, so the corpus (and a loss
curve trained on it) is reproducible on one Python version, not across versions.

English text: :func:`fetch_python_docs` (``hymo-mini fetch-docs FOLDER``) downloads the
Python documentation's sources (reStructuredText, about 11 MB of English prose with code
examples, under the PSF licence) with the system's package client, apt-get; train on them
with ``--data FOLDER --pattern '*.rst.txt'``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["ByteCorpus", "DataError", "load_corpus", "stdlib_root", "encode", "decode",
           "DEFAULT_MAX_BYTES", "fetch_python_docs", "corpus_digest"]

DEFAULT_MAX_BYTES = 4_000_000  # what load_corpus reads at most unless told otherwise


_SKIP_FOLDERS = {"site-packages", "dist-packages", "__pycache__", ".git"}


class DataError(ValueError):
    """The training data cannot be built; the message says which path and why."""


def stdlib_root() -> Path:
    """The folder holding the Python standard library's source files."""
    return Path(sysconfig.get_paths()["stdlib"])


def encode(text: str) -> torch.Tensor:
    """UTF-8 bytes of ``text`` as a (t,) int64 token tensor."""
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)


def decode(tokens) -> str:
    """Bytes back to text; bytes that do not form valid UTF-8 become U+FFFD."""
    return bytes(int(t) for t in tokens).decode("utf-8", errors="replace")


def _is_val(relative: str, val_percent: float) -> bool:
    digest = hashlib.sha256(relative.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "little") % 10_000 < val_percent * 100


def _collect(paths: list[Path], pattern: str) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for root in paths:
        if not root.exists():
            raise DataError(f"data path {str(root)!r} does not exist")
        if root.is_file():
            found.append((root.name, root))
            continue
        for folder, subfolders, names in os.walk(root):
            # installed packages are not the standard library; caches are not text
            subfolders[:] = [d for d in subfolders if d not in _SKIP_FOLDERS]
            for name in names:
                if fnmatch.fnmatch(name, pattern):
                    path = Path(folder) / name
                    found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


@dataclass
class ByteCorpus:
    """Training and validation byte streams (uint8 tensors) and where they came from."""

    train: torch.Tensor  # (n_train,) uint8
    val: torch.Tensor  # (n_val,) uint8
    n_files: int
    source: str

    def __post_init__(self) -> None:
        for name in ("train", "val"):
            stream = getattr(self, name)
            if stream.dtype != torch.uint8 or stream.ndim != 1:
                raise DataError(f"{name} must be a 1-D uint8 tensor, got {stream.dtype} "
                                f"{tuple(stream.shape)}")

    def _check(self, split: str, batch_size: int, seq_len: int) -> torch.Tensor:
        if split not in ("train", "val"):
            raise DataError(f"split must be 'train' or 'val', got {split!r}")
        if not (isinstance(batch_size, int) and batch_size > 0):
            raise DataError(f"batch_size must be a positive integer, got {batch_size!r}")
        if not (isinstance(seq_len, int) and seq_len > 0):
            raise DataError(f"seq_len must be a positive integer, got {seq_len!r}")
        stream = getattr(self, split)
        if stream.numel() < seq_len + 1:
            raise DataError(f"the {split} split has {stream.numel():,} bytes, fewer than "
                            f"seq_len + 1 = {seq_len + 1}: use a shorter seq_len or more text")
        return stream

    def batch(self, step: int, batch_size: int, seq_len: int, seed: int = 0,
              split: str = "train", rows: slice | None = None) -> torch.Tensor:
        """Random windows of ``seq_len + 1`` bytes: (batch_size, seq_len + 1) int64.
        A model reads ``[:, :-1]`` and predicts ``[:, 1:]``; the same (seed, step) always
        gives the same batch. ``rows``: only those rows of it (a data-parallel rank's
        share), cut without reading the others' bytes."""
        stream = self._check(split, batch_size, seq_len)
        gen = torch.Generator().manual_seed(seed * 1_000_003 + step)  # on the host, always
        starts = torch.randint(stream.numel() - seq_len, (batch_size,), generator=gen)  # (b,)
        if rows is not None:
            starts = starts[rows]  # (rows,): the same draws, so the same windows
        if stream.device.type == "cuda":  # pinned + non_blocking: the host does not wait
            starts = starts.pin_memory().to(stream.device, non_blocking=True)
        index = starts[:, None] + torch.arange(seq_len + 1, device=stream.device)  # (b, t + 1)
        return stream[index].long()

    def val_batches(self, n_batches: int, batch_size: int, seq_len: int) -> list[torch.Tensor]:
        """A fixed validation set: windows evenly spaced over the validation stream."""
        stream = self._check("val", batch_size, seq_len)
        count = n_batches * batch_size
        starts = torch.linspace(0, stream.numel() - seq_len - 1, count).long()
        index = starts[:, None].to(stream.device) + torch.arange(seq_len + 1,
                                                                 device=stream.device)
        return list(stream[index].long().split(batch_size))

    def to(self, device) -> ByteCorpus:
        """The same corpus with both streams on ``device``: batches are then cut there,
        and only the few window offsets of each batch cross from the host."""
        device = torch.device(device)
        return ByteCorpus(self.train.to(device), self.val.to(device), self.n_files, self.source)

    def describe(self) -> str:
        return (f"{self.source}: {self.n_files} files, {self.train.numel():,} training bytes, "
                f"{self.val.numel():,} validation bytes")


def load_corpus(paths=None, *, max_bytes: int | None = DEFAULT_MAX_BYTES, val_percent: float = 10.0,
                pattern: str = "*.py") -> ByteCorpus:
    """Build a :class:`ByteCorpus` from files or folders (default: the standard library).

    ``paths``: a path or a list of paths; folders are searched recursively for files
    matching ``pattern``. ``max_bytes`` caps the total read (in path order) so a first run
    is quick; None reads everything. ``val_percent`` of files (by hash) are validation.
    """
    if paths is None:
        roots, source = [stdlib_root()], "Python standard library"
    else:
        roots = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
        if not roots:
            raise DataError("paths is an empty list: pass at least one file or folder")
        source = ", ".join(str(r) for r in roots)
    if not 0 < val_percent < 100:
        raise DataError(f"val_percent must be in (0, 100), got {val_percent!r}")
    if max_bytes is not None and max_bytes <= 0:
        raise DataError(f"max_bytes must be positive or None, got {max_bytes!r}")
    files = _collect(roots, pattern)
    if not files:
        raise DataError(f"no files matching {pattern!r} under {source}")
    parts: dict[bool, list[bytes]] = {True: [], False: []}
    total, used = 0, 0
    for relative, path in files:
        data = path.read_bytes()
        if not data:
            continue
        if max_bytes is not None and total + len(data) > max_bytes:
            data = data[: max_bytes - total]
        parts[_is_val(relative, val_percent)].append(data)
        total, used = total + len(data), used + 1
        if max_bytes is not None and total >= max_bytes:
            break
    if total == 0:
        raise DataError(f"the files under {source} are all empty: nothing to train on")
    if not parts[True] or not parts[False]:
        # too few files to split by file: split the one stream, last val_percent to val
        stream = b"".join(parts[True] + parts[False])
        cut = int(len(stream) * (1 - val_percent / 100))
        train_bytes, val_bytes = stream[:cut], stream[cut:]
    else:
        train_bytes, val_bytes = b"".join(parts[False]), b"".join(parts[True])
    def to_tensor(raw: bytes) -> torch.Tensor:
        if not raw:
            return torch.empty(0, dtype=torch.uint8)
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8)

    return ByteCorpus(to_tensor(train_bytes), to_tensor(val_bytes), used, source)


def corpus_digest(folder, pattern: str = "*") -> str:
    """sha256 over the files matching ``pattern`` under ``folder``, in sorted order of their
    relative paths (each path and its bytes): one fetched corpus, one digest."""
    digest = hashlib.sha256()
    for relative, path in _collect([Path(folder)], pattern):
        digest.update(relative.encode("utf-8") + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _run(command: list[str], cwd) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise DataError(f"{' '.join(command)} failed: {last}; on Debian or Ubuntu, "
                        "'sudo apt-get update' first may help")
    return done.stdout


def fetch_python_docs(out) -> dict:
    """Download the Python documentation's sources into ``out`` (``*.rst.txt`` files and
    the licence, ``COPYRIGHT``) with ``apt-get download`` and ``dpkg-deb``: Debian's or
    Ubuntu's ``python3.X-doc`` package for the system's Python 3. Returns what was fetched
    (package, version, files, bytes, sha256 of the corpus)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DataError(f"{str(out)!r} is not empty: fetch into a new folder")
    for tool in ("apt-get", "apt-cache", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise DataError(f"fetching the Python documentation needs {tool} (Debian or "
                            "Ubuntu); elsewhere train on any text folder with --data")
    depends = _run(["apt-cache", "depends", "python3-doc"], cwd=".")
    found = re.search(r"Depends: (python3\.\d+-doc)", depends)
    if found is None:
        raise DataError("apt-cache does not know python3-doc's documentation package")
    package = found.group(1)
    with tempfile.TemporaryDirectory() as tmp:
        _run(["apt-get", "download", package], cwd=tmp)
        (deb,) = Path(tmp).glob("*.deb")
        version = _run(["dpkg-deb", "--field", str(deb), "Version"], cwd=tmp).strip()
        _run(["dpkg-deb", "--extract", str(deb), "tree"], cwd=tmp)
        docs = Path(tmp) / "tree" / "usr" / "share" / "doc"
        sources = docs / package.removesuffix("-doc") / "html" / "_sources"
        for path in sorted(sources.rglob("*.rst.txt")):
            target = out / path.relative_to(sources)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        shutil.copyfile(docs / package / "copyright", out / "COPYRIGHT")
    files = sorted(out.rglob("*.rst.txt"))
    return {"package": package, "version": version, "files": len(files),
            "bytes": sum(f.stat().st_size for f in files),
            "sha256": corpus_digest(out, "*.rst.txt")}
