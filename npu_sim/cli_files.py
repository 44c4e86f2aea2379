"""The command line's files: input .npy checked by header before anything is read, outputs
written all or nothing, and paths whose failures name their cause (a symlink loop, a directory).
"""
from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

from npu_sim.isa.errors import InputError, ModelError

from .paths import os_reason, why_unreadable


def check_model_path(path: str) -> None:
    """A model path that is a readable regular file, or a ModelError saying why not."""
    why = why_unreadable(path)
    if why:
        raise ModelError(f"{path}: {why}")


def read_npy_header(f, where: str):
    """(shape, dtype) from an .npy header, without reading the data."""
    from numpy.lib import format as npy_format
    try:
        version = npy_format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = npy_format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unknown .npy version {version}")
    except Exception as exc:     # numpy parses the header's text: assorted errors, tokenize's too
        raise InputError(f"{where}: cannot read as .npy ({' '.join(str(exc).split())[:120]})") from None
    return shape, dtype


def _expect(shape, dtype, want_shape, want_dtype: str, where: str) -> None:
    import numpy as np

    from npu_sim.isa.dtypes import STORAGE, accepts
    storage = np.dtype(STORAGE[want_dtype])
    what = ("shape" if tuple(shape) != tuple(want_shape) else "" if accepts(want_dtype, dtype)
            else "dtype")
    if what:
        raise InputError(f"{where}: {what} mismatch: holds {dtype}{list(shape)[:8]}, the graph "
                         f"expects {storage}{list(want_shape)} (TOSA {want_dtype})")


def open_input(path: str, where: str):
    why = why_unreadable(path)
    try:
        if why:
            raise InputError(f"{where}: cannot read {path} ({why})")
        return open(path, "rb")
    except OSError as exc:
        raise InputError(f"{where}: cannot read {path} ({os_reason(exc)})") from None


def load_inputs(pairs: list[str], bindings) -> dict[str, np.ndarray]:
    """NAME=FILE.npy pairs -> arrays, each header checked against the graph input first."""
    from numpy.lib import format as npy_format

    from npu_sim.isa.dtypes import as_storage
    known = {b.name: b.view for b in bindings}
    inputs = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--input '{pair}': expected NAME=FILE.npy")
        if name not in known:
            raise InputError(f"--input {name}: the graph has no input of that name (inputs: "
                             f"{', '.join(sorted(known))})")
        if name in inputs:
            raise InputError(f"--input {name}: given twice")
        where = f"--input {name}"
        with open_input(path, where) as f:
            shape, dtype = read_npy_header(f, f"{where}: {path}")
            _expect(shape, dtype, known[name].shape, known[name].dtype, f"{where}: {path}")
            check_data_size(os.fstat(f.fileno()).st_size - f.tell(), shape, dtype,
                            f"{where}: {path}")
            try:
                f.seek(0)
                inputs[name] = as_storage(npy_format.read_array(f, allow_pickle=False),
                                          known[name].dtype)
            except (ValueError, OSError) as exc:
                raise InputError(f"{where}: cannot read {path} as .npy ({exc})") from None
    return inputs


def check_data_size(held: int, shape, dtype, where: str) -> None:
    """The bytes after an .npy's header must be its array's: fewer mean a truncated file,
    more another file joined to it or a header describing another array."""
    need = math.prod(shape) * dtype.itemsize
    if held != need:
        raise InputError(f"{where}: holds {held:,} bytes of data, its header declares "
                         f"{dtype}{list(shape)[:8]}: {need:,} bytes")


def load_state(path: str, variables) -> dict[str, np.ndarray] | None:
    """Variables saved by an earlier `run --state`; none yet means the initial values. Every
    member's header is checked against the program's variables before its data is read."""
    import zipfile                       # only here: a run without --state never needs it

    from numpy.lib import format as npy_format

    from npu_sim.isa.dtypes import as_storage
    known = {b.name: b.view for b in variables}
    if not os.path.lexists(path):
        return None
    where = f"--state {path}"
    f = open_input(path, where)
    try:
        with f, zipfile.ZipFile(f) as z:
            state = {}
            for member in z.namelist():
                name = member[:-4] if member.endswith(".npy") else member
                if name not in known:
                    raise InputError(f"{where}: holds '{name}', which is no variable of the program")
                with z.open(member) as m:
                    shape, dtype = read_npy_header(m, f"{where}: {name}")
                    held = z.getinfo(member).file_size - m.tell()
                _expect(shape, dtype, known[name].shape, known[name].dtype, f"{where}: {name}")
                check_data_size(held, shape, dtype, f"{where}: {name}")
                with z.open(member) as m:
                    state[name] = as_storage(npy_format.read_array(m, allow_pickle=False),
                                             known[name].dtype)
            return state
    # NotImplementedError: a compression method zipfile lacks; RuntimeError: an encrypted member
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError,
            NotImplementedError, RuntimeError) as exc:
        raise InputError(f"{where}: cannot read as .npz ({' '.join(str(exc).split())[:120]})") from None


class Staged:
    """Files written beside their destinations and moved into place together by commit(), so
    a run that fails at any point leaves none of them, and no staged .part file either."""

    def __init__(self, reads=()):
        self.items: list[tuple[Path, Path]] = []
        self.made: list[Path] = []          # folders made for the outputs, removed if unused
        # what the command reads: an output there would replace its own input
        self.reads = {os.path.realpath(p) for p in reads if p}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for tmp, _ in self.items:
            tmp.unlink(missing_ok=True)
        if self.items:                      # not committed: the folders it made go too
            for folder in reversed(self.made):
                try:
                    folder.rmdir()
                except OSError:             # no longer empty: something else is there
                    pass

    def path(self, final) -> Path:
        """Where to write what will become `final`."""
        if not str(final):          # Path("") would name the current directory
            raise InputError("an empty output path")
        final = Path(final)
        if final.is_dir():
            raise InputError(f"{final}: is a directory, expected a file to write")
        if final.exists() and not final.is_file():      # moving a file there would replace it
            raise InputError(f"{final}: is not a regular file (a FIFO or device?); outputs are "
                             "written beside their destination and moved into place whole")
        real = os.path.realpath(final)
        if any(real == os.path.realpath(done) for _, done in self.items):
            raise InputError(f"{final}: named for two outputs of one run")
        if real in self.reads:
            raise InputError(f"{final}: is an input of this command; an output there would "
                             "replace it")
        # Named by this process (tempfile's import was a fortieth of a cached run's start-up);
        # a name a killed run left behind is passed over.
        for n in itertools.count():
            tmp = final.with_name(f".{final.name}.{os.getpid()}-{n}.part")
            try:
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                break
            except FileExistsError:
                continue
            except OSError as exc:          # named by the destination, not the .part file
                raise OSError(exc.errno, exc.strerror, str(final)) from None
        self.items.append((tmp, final))
        return tmp

    def text(self, final, text: str) -> None:
        self.path(final).write_text(text)

    def outputs(self, outputs: dict[str, np.ndarray], out_dir: Path) -> list[Path]:
        import numpy as np

        from npu_sim.isa.dtypes import as_npy
        finals = output_paths(outputs, out_dir)
        if any(os.path.realpath(out_dir) == os.path.realpath(done) for _, done in self.items):
            raise InputError(f"{out_dir}: named as the output folder and as an output file")
        missing = [d for d in (out_dir, *out_dir.parents) if not d.exists()]
        out_dir.mkdir(parents=True, exist_ok=True)
        self.made += reversed(missing)
        for value, final in zip(outputs.values(), finals):
            with open(self.path(final), "wb") as f:
                np.save(f, as_npy(value), allow_pickle=False)
        return finals

    def state(self, state: dict[str, np.ndarray], final) -> None:
        import numpy as np

        from npu_sim.isa.dtypes import as_npy
        with open(self.path(final), "wb") as f:
            np.savez(f, **{name: as_npy(value) for name, value in state.items()})

    def commit(self) -> None:
        while self.items:
            tmp, final = self.items[0]
            try:
                os.replace(tmp, final)
            except OSError as exc:          # named by the destination, not the .part file
                raise OSError(exc.errno, exc.strerror, str(final)) from None
            self.items.pop(0)


def output_paths(names, out_dir: Path) -> list[Path]:
    """Where each output goes; a destination that cannot be replaced is refused up front."""
    paths = []
    for name in names:
        # Portable file names: every character outside [A-Za-z0-9._-] becomes '_' (TFLite
        # names such as 'StatefulPartitionedCall:0' or 'model/dense/BiasAdd').
        safe = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in name)
        final = out_dir / f"{safe}.npy"
        if final in paths:
            raise InputError(f"outputs '{name}' and another both become the file {final}")
        if final.is_dir():
            raise InputError(f"--output-dir: {final} is a directory; the output '{name}' cannot go there")
        paths.append(final)
    return paths
