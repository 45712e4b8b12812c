"""The token bank: the frozen prefix's output tokens, computed once per key and shared by every run.

The methods that train a ViT's last blocks spend most of an epoch in the frozen prefix (77% of a
Joint (unfrozen) epoch with ViT-B/16 on a CPU). With `features.tokens=bank` the prefix runs once per
stored view instead: the bank holds, for one (dataset and its options, backbone and its weights,
prefix depth, augmentation policy, V = `features.views`, `features.bank_seed`), the prefix's tokens of
V augmented views of every training image and of the plain view of every train, val and test image,
in fp16 (`features.token_dtype=float8` halves that where the hardware has fp8), as memory-mapped
`.npy` files under `<cache>/banks/<key>/`. A run reads the batches it asks for from the mapped files,
or, on a GPU with room for the whole bank, from a copy held on the GPU; batches read from the files go
to the GPU through pinned memory, asynchronously. Training loops name the next batch's images before
they compute the current one (`read_ahead`); on a GPU a background thread then gathers those images'
stored views from the mapped files meanwhile, so the GPU does not wait for the disk or the page
cache (on a CPU, where the same cores would do both, it measured slower and is off by default:
`location.read_ahead`).

Concurrency and crash safety are the feature bank's (`bench.features.bank.build_once`): one builder per key,
the others wait; a build killed midway leaves only a temporary directory the next builder removes.
Each file's blocks are reserved (`posix_fallocate`) before it is written through its memory map, so a
disk too small for the bank ends the run in one line naming the cache, not in SIGBUS.

Integrity (`bench.features.bank` says why this way): opening a bank checks its meta, its files' sizes and the
`.npy` headers' shapes against the recorded ones; a bank of at most `bench.features.bank.VERIFY_AT_OPEN_BYTES`
has every chunk's CRC-32 verified once per process as it opens (a damaged one is set aside and rebuilt,
and the run goes on). A larger one is verified chunk by chunk as reads first touch its chunks
(`_Chunks`, in `_take_sorted`, the one place rows are read from the mapped files, and before a copy to
the GPU): a damaged chunk moves the bank aside and fails the run with one line before any of its
values is used; the next `bench run` rebuilds the bank and resumes the run.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np
import torch

from bench.features import bank
from bench.features.bank import DamagedBank, bad_chunk, chunk_span, open_bank, touch
from bench.core.progress import LoggedProgress
from bench.errors import disk_full, first_line
from bench.data.base import ImageSet
from bench.features.tokens import LiveTokens

TOKEN_DTYPES = {"float16": (np.float16, torch.float16), "float8": (np.uint8, torch.float8_e4m3fn)}
SPLITS = ("train", "val", "test")
_READER: list[ThreadPoolExecutor] = []  # one read-ahead thread per process, made on first use


def _reader() -> ThreadPoolExecutor:
    if not _READER:
        _READER.append(ThreadPoolExecutor(1, thread_name_prefix="token-bank-read-ahead"))
    return _READER[0]


def _numpy(index: torch.Tensor | np.ndarray) -> np.ndarray:
    return index.cpu().numpy() if isinstance(index, torch.Tensor) else np.asarray(index)


class _Chunks:
    """The chunk checksums of one mapped file of a large token bank, each verified the first time a
    read touches it in this process (hashing 100+ GiB on every open would cost minutes)."""

    def __init__(self, bank_dir: Path, name: str, record: Mapping[str, Any], array: np.memmap) -> None:
        self.bank_dir, self.name, self.record = bank_dir, name, record
        self.offset, self.row_bytes = int(array.offset), int(array.strides[0]) if array.ndim else 0
        self.seen = bank._inode(bank_dir)
        self.verified: set[int] = set()
        self.lock = threading.Lock()  # the read-ahead thread reads too

    def check_rows(self, rows: np.ndarray) -> None:
        """Verify the chunks holding `rows` (first-axis indices) not verified yet; raise `DamagedBank`
        (after moving the bank aside) when one does not match its checksum."""
        size = self.record["chunk_bytes"]
        rows = np.asarray(rows, dtype=np.int64).ravel()
        first = (self.offset + rows * self.row_bytes) // size
        last = (self.offset + (rows + 1) * self.row_bytes - 1) // size
        if self.row_bytes > size:  # a row spans several chunks
            wanted = {c for f, l in set(zip(first.tolist(), last.tolist())) for c in range(f, l + 1)}
        else:  # a row lies in one chunk or straddles two
            wanted = set(np.unique(np.concatenate([first, last])).tolist())
        self._verify(wanted)

    def check_all(self) -> None:
        self._verify(set(range(len(self.record["crc32"]))))

    def _verify(self, chunks: set[int]) -> None:
        if chunks <= self.verified:
            return
        with self.lock:
            todo = sorted(chunks - self.verified)
            bad = bad_chunk(self.bank_dir / self.name, self.record, todo)
            if bad is None:
                self.verified.update(todo)
                return
        why = f"{self.name} {chunk_span(self.record, bad)} do not match their checksum"
        aside = bank.set_aside(self.bank_dir, why, "token bank", lambda line: None, self.seen)
        raise DamagedBank(f"token bank {self.bank_dir.name} is damaged ({why}); moved to "
                          f"{aside or 'one side by another run'}; the next `bench run` rebuilds it and resumes this run")


def _check_rows(array: np.ndarray, rows: np.ndarray) -> None:
    chunks = getattr(array, "bench_chunks", None)  # set on the mapped arrays of a large bank only
    if chunks is not None:
        chunks.check_rows(rows)


def _take_sorted(array: np.ndarray, *index: np.ndarray) -> torch.Tensor:
    """`array[index]` on the host, read from a mapped file in sorted order, then put back in the
    order asked for (the chunks read verified first, for a large bank)."""
    _check_rows(array, index[0])
    order = np.argsort(index[0], kind="stable")
    block = torch.from_numpy(np.ascontiguousarray(array[tuple(i[order] for i in index)]))
    out = torch.empty_like(block)
    out[torch.from_numpy(order)] = block
    return out


def _writer(path: Path, shape: tuple[int, ...], dtype: str) -> np.memmap:
    array = np.lib.format.open_memmap(path, mode="w+", dtype=TOKEN_DTYPES[dtype][0], shape=shape)
    _allocate(path, int(array.offset) + array.nbytes)
    return array


def _allocate(path: Path, size: int) -> None:
    """Reserve the blocks of the (sparse) file `path` before anything is written through its map: a disk
    that fills under a write through a memory map kills the process with SIGBUS (reported as a crash),
    where a full disk here is an `OSError` (ENOSPC) naming the file, which ends the run in one line."""
    if not hasattr(os, "posix_fallocate") or size == 0:  # not on macOS: writes go through the map as before
        return
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as err:
        if disk_full(err):
            raise OSError(err.errno, err.strerror, str(path)) from None
        # another refusal (a file system without the call): nothing reserved, the writes go on as before
    finally:
        os.close(fd)


def _to_store(x: torch.Tensor, dtype: str) -> np.ndarray:
    stored = x.to(TOKEN_DTYPES[dtype][1]).cpu()
    return stored.view(torch.uint8).numpy() if dtype == "float8" else stored.numpy()


def build_token_bank(cache: Path, fields: Mapping[str, Any], sources: Mapping[str, LiveTokens], views: int,
                     seed: int, batch_size: int, dtype: str, log: Callable[[str], None]) -> dict[str, np.ndarray]:
    """The bank's arrays (memory-mapped, read-only): `train_views` N×V×T×D and `<split>_plain` N×T×D.
    The views are drawn batch by batch, view by view, from one generator seeded `seed`: what a
    `LiveTokens` source gives for the same draws."""
    def write(tmp: Path) -> dict[str, Any]:
        shapes: dict[str, Any] = {}
        probe = sources["train"].plain(np.arange(1))
        tokens, dim = probe.shape[1:]
        total = sum(len(source) for source in sources.values()) + views * len(sources["train"])
        progress = LoggedProgress("token bank", total, log, unit="image passes")
        for split, source in sources.items():
            plain = _writer(tmp / f"{split}_plain.npy", (len(source), tokens, dim), dtype)
            for start in range(0, len(source), batch_size):
                index = np.arange(start, min(start + batch_size, len(source)))
                plain[index] = _to_store(source.plain(index), dtype)
                progress.advance(len(index))
            plain.flush()
            shapes[f"{split}_plain"] = list(plain.shape)
        train = sources["train"]
        stored = _writer(tmp / "train_views.npy", (len(train), views, tokens, dim), dtype)
        gen = torch.Generator().manual_seed(seed)
        for start in range(0, len(train), batch_size):
            index = np.arange(start, min(start + batch_size, len(train)))
            for v in range(views):
                stored[index, v] = _to_store(train.one_view(index, gen), dtype)
            progress.advance(len(index) * views)
        stored.flush()
        shapes["train_views"] = list(stored.shape)
        return shapes

    def load(path: Path) -> dict[str, np.ndarray]:
        arrays = _open_arrays(path)
        touch(path)
        log(f"token bank {path.name} loaded (memory-mapped)")
        return arrays

    # verified whole once per process up to VERIFY_AT_OPEN_BYTES, chunk by chunk as read above it
    return open_bank(cache, fields, write, load, log, "token bank", bank.VERIFY_AT_OPEN_BYTES, once=True)


def _open_arrays(path: Path) -> dict[str, np.ndarray]:
    """The bank's arrays, memory-mapped; `DamagedBank` when a header or a shape is not the recorded one.
    Above `VERIFY_AT_OPEN_BYTES` each array checks its chunks as they are first read."""
    arrays = {}
    for f in sorted(path.glob("*.npy")):
        try:
            arrays[f.stem] = np.load(f, mmap_mode="r")
        except (OSError, ValueError) as err:  # a damaged header, a file shorter than its header says
            raise DamagedBank(f"{f.name} unreadable ({first_line(err)})") from None
    bank._check_shapes(path, {name: list(a.shape) for name, a in arrays.items()})
    files = bank._read_meta(path).get("files") or {}
    if sum(r["size"] for r in files.values()) > bank.VERIFY_AT_OPEN_BYTES:
        for name, array in arrays.items():
            array.bench_chunks = _Chunks(path, f"{name}.npy", files[f"{name}.npy"], array)
    return arrays


class BankTokens:
    """A token source (the interface of `bench.features.tokens.LiveTokens`) reading stored tokens: two
    different stored views per image and draw, the plain tokens for evaluation, and for a replay
    buffer (DER) the images' rows in the bank, whose replayed views are stored ones too. What the
    bank does not hold goes to the live source: views augmented otherwise than the stored ones
    (CaSSLe's asymmetric views), and images a buffer kept before the run read a bank."""

    def __init__(self, arrays: Mapping[str, np.ndarray], split: str, rows: np.ndarray, live: LiveTokens,
                 device: torch.device, dtype: str = "float16", resident: Mapping[str, torch.Tensor] | None = None,
                 read_ahead: bool = True) -> None:
        """`split` names the stored plain tokens these images' rows index (`train` for the val images
        where they are the training images); `read_ahead=False` ignores `read_ahead` calls."""
        self.arrays, self.split, self.rows, self.live = arrays, split, np.asarray(rows), live
        self.device, self.dtype, self.resident = torch.device(device), dtype, resident or {}
        self.images = live.images
        self.reads_ahead = read_ahead and "train_views" not in self.resident
        self._ahead: list[tuple[np.ndarray, Future]] = []  # the batches read ahead: the current and the next
        self.read_ahead_hits = 0

    def __len__(self) -> int:
        return len(self.rows)

    def subset(self, index: np.ndarray) -> "BankTokens":
        index = np.asarray(index)
        return BankTokens(self.arrays, self.split, self.rows[index], self.live.subset(index), self.device,
                          self.dtype, self.resident, self.reads_ahead)

    def read_ahead(self, index: torch.Tensor) -> None:
        """Start gathering every stored view of the images `index` (the next batch) in the background;
        `stored_views` for the same images then takes them from there. All V views are gathered,
        because which two a batch reads is drawn only when it is read (from the run's generator, in
        the order the run draws)."""
        if not self.reads_ahead:
            return
        rows = _numpy(index)  # rows × V × T × D on the host: the batch's two views are picked from it
        self._ahead = [*self._ahead[-1:], (rows, _reader().submit(_take_sorted, self.arrays["train_views"],
                                                                  self.rows[rows]))]

    def end_read_ahead(self) -> None:
        """Drop the blocks read ahead (a loop's end: they are V batches' worth of tokens)."""
        self._ahead = []

    def _read_ahead_block(self, index: np.ndarray) -> torch.Tensor | None:
        for wanted, block in self._ahead:
            if np.array_equal(wanted, index):
                self.read_ahead_hits += 1
                return block.result()
        return None

    def _read(self, name: str, *index: np.ndarray) -> torch.Tensor:
        """Rows of a stored array on the device, as float32."""
        if name in self.resident:  # the whole bank on the GPU
            return self._decode(self.resident[name][tuple(torch.as_tensor(i, device=self.device) for i in index)])
        return self._decode(self._to_device(_take_sorted(self.arrays[name], *index)))

    def _to_device(self, block: torch.Tensor) -> torch.Tensor:
        """Host tokens on the device: through pinned memory, asynchronously, on a GPU."""
        return block.pin_memory().to(self.device, non_blocking=True) if self.device.type == "cuda" else block

    def _decode(self, x: torch.Tensor) -> torch.Tensor:
        return (x.view(torch.float8_e4m3fn) if self.dtype == "float8" else x).float()

    def two_views(self, index: torch.Tensor, gen: torch.Generator,
                  variants: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if variants:  # augmented otherwise than the stored views: drawn fresh
            return self.live.two_views(index, gen, variants)
        first, second = self.draw_views(index, gen)
        return self.stored_views(index, first), self.stored_views(index, second)

    @property
    def n_views(self) -> int:
        """V: the stored augmented views of every training image."""
        return self.arrays["train_views"].shape[1]

    def draw_views(self, index: torch.Tensor, gen: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Which stored views `two_views` reads for the images `index`: two different ones per image
        (the same one when V = 1), drawn from `gen`."""
        v = self.n_views
        first = torch.randint(0, v, (len(index),), generator=gen)
        second = (first + torch.randint(1, v, (len(index),), generator=gen)) % v if v > 1 else first
        return first.numpy(), second.numpy()

    def stored_views(self, index: torch.Tensor | np.ndarray, views: np.ndarray) -> torch.Tensor:
        """Stored view `views[k]` of image `index[k]` (indices into this source's images)."""
        index = _numpy(index)
        block = self._read_ahead_block(index) if self._ahead else None
        if block is None:
            return self._read("train_views", self.rows[index], np.asarray(views))
        return self._decode(self._to_device(block[torch.arange(len(index)), torch.as_tensor(views)]))

    def keep(self, index: torch.Tensor | np.ndarray) -> torch.Tensor:
        """What a replay buffer keeps of the images `index`: their rows in the bank (int64), where
        every stored view of them is, instead of the decoded images."""
        return torch.from_numpy(self.rows[_numpy(index)].astype(np.int64))

    def views_of(self, kept: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """One stored view of each kept image, drawn from `gen` (a buffer of decoded images, from a
        checkpoint written without the bank: fresh views through the prefix)."""
        if kept.dtype == torch.uint8:
            return self.live.views_of(kept, gen)
        views = torch.randint(0, self.n_views, (len(kept),), generator=gen)
        return self._read("train_views", kept.numpy(), views.numpy())

    def plain(self, index: np.ndarray) -> torch.Tensor:
        return self._read(f"{self.split}_plain", self.rows[np.asarray(index)])

    def batches(self, batch_size: int = 256) -> Iterator[torch.Tensor]:
        for start in range(0, len(self), batch_size):
            yield self.plain(np.arange(start, min(start + batch_size, len(self))))


def resident_copy(arrays: Mapping[str, np.ndarray], device: torch.device, fraction: float = 0.5) -> dict[str, torch.Tensor]:
    """The whole bank on the GPU when it takes at most `fraction` of its free memory; else nothing
    (batches are then read from the mapped files through pinned memory)."""
    device = torch.device(device)
    if device.type != "cuda":
        return {}
    free, _ = torch.cuda.mem_get_info(device)
    if sum(a.nbytes for a in arrays.values()) > fraction * free:
        return {}
    for array in arrays.values():  # copied whole: every chunk verified first (a large bank)
        chunks = getattr(array, "bench_chunks", None)  # a large bank's file, read in verified chunks
        if chunks is not None:
            chunks.check_all()
    return {name: torch.from_numpy(np.ascontiguousarray(a)).to(device) for name, a in arrays.items()}


def token_bank_bytes(n_train: int, n_eval: int, views: int, tokens: int, dim: int, bytes_per_value: int = 2) -> int:
    """What a bank holds: (N_train·(V + 1) + N_eval) · T · D values."""
    return (n_train * (views + 1) + n_eval) * tokens * dim * bytes_per_value


def unlabelled(images: ImageSet) -> ImageSet:
    return ImageSet(images.images, np.full(len(images), -1))
