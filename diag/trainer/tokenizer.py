"""Byte-level tokenizer: every UTF-8 byte is a token, plus one end-of-text token between documents.

Nothing to download and nothing to train, so a dataset prepared anywhere decodes the same
everywhere. Vocabulary: 0..255 the bytes, 256 end-of-text.
"""

from __future__ import annotations

EOT = 256
VOCAB_SIZE = 257


def encode(text: str) -> list[int]:
    """Token ids of ``text`` (its UTF-8 bytes)."""
    return list(text.encode("utf-8"))


def encode_bytes(data: bytes) -> bytes:
    """The fast path used by ``prepare``: bytes already are token ids."""
    return data


def decode(ids) -> str:
    """Text of token ids; end-of-text becomes a newline, invalid UTF-8 a replacement character."""
    out = bytearray()
    for i in ids:
        i = int(i)
        if i == EOT:
            out += b"\n"
        elif 0 <= i < 256:
            out.append(i)
        else:
            raise ValueError(f"token id {i} is outside the byte vocabulary (0..{EOT})")
    return out.decode("utf-8", errors="replace")
