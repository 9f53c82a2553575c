"""Reading source bytes: a documented decoding policy and binary detection.

Policy (``errors=``):

- ``"fallback"`` (default): UTF-8 (a leading BOM is removed and reported as ``bom=True``); bytes that are not valid
  UTF-8 are decoded as cp1252, or Latin-1 for the few bytes cp1252 leaves undefined, so every byte maps to one
  character and nothing is lost; the returned info says ``encoding="cp1252"`` / ``"latin-1"`` and
  ``decode_fallback=True``.
- ``"strict"``: anything but valid UTF-8 raises :class:`~llmc_splitters.errors.UndecodableInputError`.

Binary data (a NUL byte, or more than 30% control bytes in the first 8 KiB) is never decoded: the chunker raises
:class:`~llmc_splitters.errors.UnsupportedInputError` and directory walkers skip the file with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError, UndecodableInputError, UnsupportedInputError

_SNIFF = 8192
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\b\x1b")
ERRORS = ("fallback", "strict")


@dataclass(frozen=True)
class Decoded:
    """How bytes were turned into text."""

    text: str
    encoding: str
    bom: bool = False
    decode_fallback: bool = False

    def metadata(self) -> dict[str, object]:
        """Metadata worth recording on spans (empty for plain UTF-8)."""
        out: dict[str, object] = {}
        if self.encoding != "utf-8":
            out["encoding"] = self.encoding
        if self.bom:
            out["bom"] = True
        if self.decode_fallback:
            out["decode_fallback"] = True
        return out


def binary_reason(data: bytes) -> str | None:
    """Why ``data`` looks binary (``None`` when it looks like text)."""
    head = data[:_SNIFF]
    if b"\x00" in head:
        return "contains NUL bytes (binary file)"
    if not head:
        return None
    controls = sum(1 for b in head if b < 32 and b not in _TEXT_CONTROLS)
    if controls / len(head) > 0.30:
        return f"{controls / len(head):.0%} control bytes (binary file)"
    return None


def decode(data: bytes, errors: str = "fallback") -> Decoded:
    """Decode source bytes under the policy above.

    Raises:
        UnsupportedInputError: ``data`` is binary.
        UndecodableInputError: ``errors="strict"`` and ``data`` is not UTF-8.
        ConfigurationError: ``errors`` is not one of ``"fallback"``, ``"strict"``.
    """
    if errors not in ERRORS:
        msg = f"errors must be one of {ERRORS}, got {errors!r}"
        raise ConfigurationError(msg)
    reason = binary_reason(data)
    if reason is not None:
        msg = f"input {reason}: binary data cannot be chunked; pass text, or skip this file"
        raise UnsupportedInputError(msg)
    bom = data.startswith(b"\xef\xbb\xbf")
    body = data[3:] if bom else data
    try:
        return Decoded(body.decode("utf-8"), "utf-8", bom=bom)
    except UnicodeDecodeError as exc:
        if errors == "strict":
            msg = (
                f"input is not valid UTF-8 (byte {exc.start}: {exc.reason}); decode it yourself and pass a str, "
                "or use errors='fallback' to decode it as cp1252/Latin-1"
            )
            raise UndecodableInputError(msg) from exc
    try:
        return Decoded(body.decode("cp1252"), "cp1252", bom=bom, decode_fallback=True)
    except UnicodeDecodeError:
        return Decoded(body.decode("latin-1"), "latin-1", bom=bom, decode_fallback=True)


def read_source(path: str, errors: str = "fallback") -> Decoded:
    """Read and decode a file (see :func:`decode`)."""
    with open(path, "rb") as fh:
        return decode(fh.read(), errors)
