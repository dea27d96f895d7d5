"""Tabular regression data from CSV or NPZ files (stdlib readers; no numpy or pandas needed).

``--data-root`` is either one file (split 80/20 by a seeded shuffle) or a directory holding
``train.csv``/``val.csv`` (or ``.npz``). Features and target are standardised with the training
split's statistics; MAE and RMSE are reported back in the target's own units.
"""

from __future__ import annotations

import ast
import csv
import math
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import Dataset

from .errors import UsageError

_NPY_DTYPES = {
    "f8": torch.float64,
    "f4": torch.float32,
    "f2": torch.float16,
    "i8": torch.int64,
    "i4": torch.int32,
    "i2": torch.int16,
    "i1": torch.int8,
    "u1": torch.uint8,
    "b1": torch.bool,
}


@dataclass
class Table:
    """Named numeric columns of equal length (float64)."""

    columns: dict[str, torch.Tensor]
    dropped: list[str]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0


def _parse_float(text: str) -> float:
    text = text.strip()
    return math.nan if text == "" or text.lower() in ("nan", "na", "null") else float(text)


def read_csv(path: Path) -> Table:
    """Numeric columns of a CSV (or TSV) file with a header row; other columns are dropped."""
    with path.open(newline="") as fh:
        reader = csv.reader(fh, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise UsageError("--data-root", f"{path} is empty") from None
        numeric = [True] * len(header)
        raw: list[list[float]] = [[] for _ in header]
        for row in reader:
            if not row:
                continue
            for i in range(len(header)):
                if not numeric[i]:
                    continue
                try:
                    raw[i].append(_parse_float(row[i]) if i < len(row) else math.nan)
                except ValueError:
                    numeric[i] = False  # a text column (ids, timestamps): leave it out
                    raw[i] = []
    columns = {
        name: torch.tensor(values, dtype=torch.float64)
        for name, values, ok in zip(header, raw, numeric, strict=True)
        if ok
    }
    dropped = [name for name, ok in zip(header, numeric, strict=True) if not ok]
    return Table(columns, dropped)


def _npy_array(data: bytes, where: str) -> torch.Tensor | None:
    """Decode one ``.npy`` payload; None for dtypes that are not numbers (strings, objects)."""
    if data[:6] != b"\x93NUMPY":
        raise UsageError("--data-root", f"{where} is not a .npy array")
    major = data[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", data[8:10])
        start = 10
    else:
        (hlen,) = struct.unpack("<I", data[8:12])
        start = 12
    header = ast.literal_eval(data[start : start + hlen].decode("latin1"))
    descr: str = header["descr"]
    shape: tuple[int, ...] = tuple(header["shape"])
    if not isinstance(descr, str) or descr[1:] not in _NPY_DTYPES or descr[0] == ">":
        return None
    dtype = _NPY_DTYPES[descr[1:]]
    payload = bytearray(data[start + hlen :])
    count = math.prod(shape)
    flat = (
        torch.frombuffer(payload, dtype=dtype, count=count)
        if count
        else torch.empty(0, dtype=dtype)
    )
    if header.get("fortran_order"):
        array = flat.reshape(tuple(reversed(shape))).permute(*reversed(range(len(shape))))
    else:
        array = flat.reshape(shape)
    return array.to(torch.float64)


def read_npz(path: Path) -> Table:
    """Columns of an ``.npz``: each 1-D array is a column, a 2-D array ``X`` gives ``X[0]``, ..."""
    columns: dict[str, torch.Tensor] = {}
    dropped: list[str] = []
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise UsageError("--data-root", f"{path} is not an .npz archive") from None
    with archive:
        for member in archive.namelist():
            name = member.removesuffix(".npy")
            array = _npy_array(archive.read(member), f"{path}:{member}")
            if array is None or array.dim() == 0 or array.dim() > 2:
                dropped.append(name)
            elif array.dim() == 1:
                columns[name] = array
            elif array.shape[1] == 1:
                columns[name] = array[:, 0]
            else:
                for j in range(array.shape[1]):
                    columns[f"{name}[{j}]"] = array[:, j]
    lengths = {len(c) for c in columns.values()}
    if len(lengths) > 1:
        raise UsageError("--data-root", f"{path}: arrays have different lengths {sorted(lengths)}")
    return Table(columns, dropped)


def read_table(path: Path) -> Table:
    """A CSV or NPZ file, chosen by suffix."""
    if path.suffix.lower() == ".npz":
        return read_npz(path)
    if path.suffix.lower() in (".csv", ".txt", ".tsv"):
        return read_csv(path)
    raise UsageError("--data-root", f"{path}: expected a .csv or .npz file")


def _split_files(root: Path) -> tuple[Path, Path | None]:
    if root.is_file():
        return root, None
    for suffix in (".csv", ".npz"):
        train = root / f"train{suffix}"
        for val_name in ("val", "valid", "validation", "test"):
            val = root / f"{val_name}{suffix}"
            if train.is_file() and val.is_file():
                return train, val
        if train.is_file():
            return train, None
    raise UsageError(
        "--data-root",
        f"{root} holds no train.csv/val.csv or train.npz/val.npz; pass a directory with those "
        "files or a single .csv/.npz file",
    )


def _matrix(table: Table, target: str, features: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.stack([table.columns[f] for f in features], dim=1)
    y = table.columns[target]
    keep = ~torch.isnan(y)
    return x[keep], y[keep]


class TabularDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Standardised feature rows and targets, as float32."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x = x.to(torch.float32).contiguous()
        self.y = y.to(torch.float32).contiguous()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]


@dataclass
class TabularData:
    """Train and validation splits plus the target's scale (to report errors in its units)."""

    train: TabularDataset
    val: TabularDataset
    features: list[str]
    target_mean: float
    target_std: float
    dropped: list[str]


def load_tabular(root: Path, target: str, seed: int) -> TabularData:
    """Read, split, impute (training means) and standardise a regression table."""
    train_path, val_path = _split_files(root)
    table = read_table(train_path)
    if target not in table.columns:
        where = "a non-numeric column" if target in table.dropped else "not a column"
        raise UsageError(
            "--target",
            f"{target!r} is {where} of {train_path}; numeric columns: {', '.join(table.columns)}",
        )
    features = [c for c in table.columns if c != target]
    if not features:
        raise UsageError(
            "--data-root", f"{train_path} has no numeric feature columns besides {target}"
        )
    x, y = _matrix(table, target, features)
    if val_path is None:
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
        cut = max(1, round(0.8 * len(y)))
        x_val, y_val = x[order[cut:]], y[order[cut:]]
        x, y = x[order[:cut]], y[order[:cut]]
    else:
        val_table = read_table(val_path)
        missing = [c for c in (target, *features) if c not in val_table.columns]
        if missing:
            raise UsageError("--data-root", f"{val_path} lacks columns {', '.join(missing)}")
        x_val, y_val = _matrix(val_table, target, features)
    if len(y) == 0:
        raise UsageError("--data-root", f"{train_path} has no rows with a value for {target}")
    mean = torch.nanmean(x, dim=0)
    mean = torch.where(torch.isnan(mean), torch.zeros_like(mean), mean)
    x = torch.where(torch.isnan(x), mean, x)
    x_val = torch.where(torch.isnan(x_val), mean, x_val)
    std = x.std(dim=0, unbiased=False)
    std = torch.where(std > 0, std, torch.ones_like(std))
    y_mean = float(y.mean())
    y_std = float(y.std(unbiased=False)) or 1.0
    return TabularData(
        train=TabularDataset((x - mean) / std, (y - y_mean) / y_std),
        val=TabularDataset((x_val - mean) / std, (y_val - y_mean) / y_std),
        features=features,
        target_mean=y_mean,
        target_std=y_std,
        dropped=table.dropped,
    )
