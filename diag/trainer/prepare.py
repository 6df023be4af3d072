"""Text (a file or a directory of files) → one token file in the format of ``data.py``.

Written to a temporary name beside the output, fsync'd, then renamed, so a crash never leaves
a half-written file under the real name; an existing output is never replaced without ``force``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from llmdiag.trainer import data, tokenizer

TEXT_SUFFIXES = (".txt", ".md", ".text", ".rst", ".jsonl", ".json", ".csv", ".py")
CHUNK = 1 << 20


def find_inputs(source: str | Path) -> list[Path]:
    """The text files of ``source``: itself, or the matching files under it (sorted, deterministic)."""
    p = Path(source)
    if p.is_file():
        return [p]
    if p.is_dir():
        return sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)
    raise FileNotFoundError(f"{p}: no such file or directory")


def prepare(
    inputs: Iterable[Path],
    output: str | Path,
    *,
    force: bool = False,
    progress: Callable[[int], None] | None = None,
) -> data.Header:
    """Tokenise every input (documents separated by end-of-text) into ``output``.

    ``progress(n)`` is called with the number of input bytes just consumed.
    Raises FileExistsError when ``output`` exists and ``force`` is false.
    """
    import numpy as np

    out = Path(output)
    if out.exists() and not force:
        raise FileExistsError(f"{out} exists; pass --force to replace it")
    if out.is_dir():
        raise IsADirectoryError(f"{out} is a directory")
    token_bytes = data.dtype_for_vocab(tokenizer.VOCAB_SIZE)
    dtype = data.DTYPES[token_bytes]
    from llmdiag.util.files import open_output

    count = 0
    # the rules of every llmdiag output: atomic, mode and owner kept, links written through
    with open_output(out, "OUTPUT", binary=True) as f:
        f.write(data.pack_header(token_bytes, 0))  # count filled in at the end
        for i, path in enumerate(inputs):
            if i:
                f.write(np.array([tokenizer.EOT], dtype=dtype).tobytes())
                count += 1
            with path.open("rb") as src:
                while chunk := src.read(CHUNK):
                    ids = np.frombuffer(tokenizer.encode_bytes(chunk), dtype=np.uint8).astype(dtype)
                    f.write(ids.tobytes())
                    count += len(ids)
                    if progress:
                        progress(len(chunk))
        f.seek(0)
        f.write(data.pack_header(token_bytes, count))
    # what was written, not read back: OUTPUT may be a device (/dev/null) or a pipe
    return data.Header(data.VERSION, token_bytes, count)
