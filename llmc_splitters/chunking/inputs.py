"""Reading source bytes: a documented decoding policy and binary detection.

Policy (``errors=``):

- ``"fallback"`` (default): UTF-8 (a leading BOM is removed and reported as ``bom=True``); bytes that are not valid
  UTF-8 are decoded as cp1252, or Latin-1 for the few bytes cp1252 leaves undefined, so every byte maps to one
  character and nothing is lost; the returned info says ``encoding="cp1252"`` / ``"latin-1"`` and
  ``decode_fallback=True``.
- ``"strict"``: anything but valid UTF-8 raises :class:`~llmc_splitters.errors.UndecodableInputError`.

Binary data is never decoded: the chunker raises :class:`~llmc_splitters.errors.UnsupportedInputError` and directory
walkers and the framework splitters skip the input with that reason. Bytes are binary (:func:`binary_reason`) when
their first 8 KiB hold a NUL byte or more than 30% control bytes, or they start with a known binary signature
(:data:`MAGIC`: PNG, JPEG, GIF, PDF, ZIP, gzip, ELF, ...).

Text handed over as ``str`` is checked too (:func:`text_binary_reason`), because loaders decode whatever they find:
a PNG read with ``errors="replace"``, ``"surrogateescape"`` or Latin-1 is a ``str``. In its first 8,192 characters,
a ``str`` is binary-looking when it

* holds a NUL character;
* starts with a known binary signature, whichever way its bytes above 0x7F were decoded (U+FFFD, a lone surrogate
  U+DC80-U+DCFF from ``surrogateescape``, a Latin-1 or a cp1252 character);
* or, in a text of at least 32 characters, more than :data:`TEXT_SUSPECT_SHARE` (10%) of its characters are
  *suspect*: U+FFFD (a byte the decoder could not read), lone surrogates, C0 control characters other than tab,
  line feed, carriage return, form feed, vertical tab, backspace and escape, DEL, and C1 controls
  (U+0080-U+009F, which no real text holds: they are what Latin-1 makes of binary bytes).

Real text of any script passes: CJK, emoji, accented Latin and Windows-1252 punctuation (curly quotes, dashes,
the euro sign, decoded correctly) hold no suspect character at all, and ANSI colour codes use the allowed escape.
Random binary decoded as Latin-1 is about 20% suspect, decoded with ``errors="replace"`` about 50%. A legacy-encoded
text decoded as UTF-8 with ``errors="replace"`` passes while fewer than one character in ten was lost; beyond that it
is refused, with the remedy (decode it with its encoding, or pass the bytes).
"""

from __future__ import annotations

import re
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


MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (or a .jar, .whl, .docx, ...)"),
    (b"PK\x05\x06", "ZIP archive"),
    (b"\x1f\x8b\x08", "gzip archive"),
    (b"BZh91AY&SY", "bzip2 archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"\x7fELF", "ELF executable"),
    (b"\xcf\xfa\xed\xfe", "Mach-O executable"),
    (b"\xca\xfe\xba\xbe", "Java class file or Mach-O executable"),
    (b"\x00asm", "WebAssembly module"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "OLE2 document (.doc, .xls, .msi)"),
    (b"OggS\x00", "Ogg media"),
    (b"\x1aE\xdf\xa3", "Matroska/WebM media"),
    (b"wOFF", "WOFF font"),
    (b"wOF2", "WOFF2 font"),
)
"""Signatures at the start of a file that mark it binary whatever else it holds, with what they are."""

TEXT_SUSPECT_SHARE = 0.10
"""Share of suspect characters (see the module docstring) above which a ``str`` is refused as binary-looking."""

TEXT_SHARE_MIN_CHARS = 32
"""The share rule applies to texts of at least this many characters (a handful of odd characters is no evidence)."""

# C0 controls but tab, LF, VT, FF, CR, backspace and escape; DEL; C1 controls; U+FFFD; surrogates.
_SUSPECT = re.compile("[\x00-\x07\x0e-\x1a\x1c-\x1f\x7f-\x9f\ufffd\ud800-\udfff]")
# The ASCII characters that _SUSPECT does not match: deleting them from an ASCII text leaves its suspects.
_ASCII_NOT_SUSPECT = bytes(c for c in range(128) if not _SUSPECT.match(chr(c)))


def _magic(head: bytes) -> str | None:
    return next((what for sig, what in MAGIC if head.startswith(sig)), None)


def binary_reason(data: bytes) -> str | None:
    """Why ``data`` looks binary (``None`` when it looks like text)."""
    head = data[:_SNIFF]
    what = _magic(head)
    if what is not None:
        return f"starts with the signature of a {what} (binary file)"
    if b"\x00" in head:
        return "contains NUL bytes (binary file)"
    if not head:
        return None
    controls = sum(1 for b in head if b < 32 and b not in _TEXT_CONTROLS)
    if controls / len(head) > 0.30:
        return f"{controls / len(head):.0%} control bytes (binary file)"
    return None


def _head_bytes(head: str) -> list[int | None]:
    """The byte each of a ``str``'s first characters came from, so that a signature is recognised however the
    bytes were decoded: ``None`` for U+FFFD (some byte above 0x7F), ``-1`` for a character no byte decodes to."""
    out: list[int | None] = []
    for ch in head:
        o = ord(ch)
        if o < 0x100:
            out.append(o)  # ASCII, or Latin-1
        elif 0xDC80 <= o <= 0xDCFF:
            out.append(o - 0xDC00)  # surrogateescape
        elif ch == "\ufffd":
            out.append(None)  # errors="replace"
        else:
            try:
                out.append(ch.encode("cp1252")[0])  # a cp1252 character (0x80-0x9F: punctuation)
            except UnicodeEncodeError:
                out.append(-1)
    return out


_MAGIC_FIRST = frozenset(sig[0] for sig, _ in MAGIC)
_MAGIC_LONGEST = max(len(sig) for sig, _ in MAGIC)


def _text_magic(text: str) -> str | None:
    first = _head_bytes(text[:1])
    if first and first[0] is not None and first[0] not in _MAGIC_FIRST:
        return None  # no signature starts with this byte (U+FFFD, any byte above 0x7F, is checked in full)
    got = _head_bytes(text[:_MAGIC_LONGEST])
    for sig, what in MAGIC:
        pairs = list(zip(got, sig))
        # U+FFFD stands for any byte above 0x7F, but a signature needs one byte matched for real.
        if len(pairs) == len(sig) and all(g is None and b >= 0x80 or g == b for g, b in pairs) \
                and any(g == b for g, b in pairs):
            return what
    return None


def _suspects(head: str) -> int:
    """How many characters of ``head`` :data:`_SUSPECT` matches. An ASCII text (most source files) is counted by
    deleting its other bytes, a C loop about three times faster than the regular expression."""
    if head.isascii():
        return len(head.encode("ascii").translate(None, _ASCII_NOT_SUSPECT))
    return len(_SUSPECT.findall(head))


def text_binary_reason(text: str) -> str | None:
    """Why ``text`` looks like binary data or undecodable text handed over as ``str`` (``None`` when it looks like
    text); see the module docstring for the rule and its threshold.

    Example:
        >>> text_binary_reason(open(__file__, encoding="utf-8").read()) is None
        True
        >>> text_binary_reason(b"\\x89PNG\\r\\n\\x1a\\n...".decode("latin-1"))
        'starts with the signature of a PNG image (binary data handed over as text)'
    """
    head = text[:_SNIFF]
    if not head:
        return None
    what = _text_magic(head)
    if what is not None:
        return f"starts with the signature of a {what} (binary data handed over as text)"
    if "\x00" in head:
        return "contains NUL characters (binary data handed over as text)"
    if len(head) < TEXT_SHARE_MIN_CHARS:
        return None
    share = _suspects(head) / len(head)
    if share > TEXT_SUSPECT_SHARE:
        return (
            f"is {share:.0%} replacement characters, lone surrogates or control characters in its first "
            f"{len(head)} characters (over {TEXT_SUSPECT_SHARE:.0%}: binary data, or text decoded with the wrong "
            "encoding)"
        )
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


# ------------------------------------------------------------------------------------------- lone surrogates
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> tuple[str, str]:
    """``text`` with each lone surrogate replaced by one character that every encoder accepts, and the record
    that restores it (``""`` when there was none).

    Lone surrogates are what ``errors="surrogateescape"`` makes of bytes that are not UTF-8 (U+DC80-U+DCFF for the
    bytes 0x80-0xFF). Our spans keep them (the text is lossless), but LlamaIndex cannot hash such text and no JSON
    store, vector store or embedding API accepts it. So a framework object gets this escaped form: an escaped byte
    becomes the character cp1252 (else Latin-1) gives that byte, as the chunker's own ``errors="fallback"``
    decoding would (``b"caf\\xe9"`` read with surrogateescape reads ``café``), and any other lone surrogate
    becomes U+FFFD. One character stands for one, so character offsets and line numbers are unchanged. The record
    lists ``<index>:<code point in hex>`` pairs, comma-separated (``"3:dce9"``), and
    :func:`restore_surrogates` gives the original text back.

    Example:
        >>> escape_surrogates("caf\\udce9 = 1")
        ('café = 1', '3:dce9')
        >>> restore_surrogates(*escape_surrogates("caf\\udce9 = 1")) == "caf\\udce9 = 1"
        True
    """
    if not _LONE_SURROGATE.search(text):
        return text, ""
    record: list[str] = []

    def swap(m: re.Match[str]) -> str:
        o = ord(m.group())
        record.append(f"{m.start()}:{o:x}")
        if 0xDC80 <= o <= 0xDCFF:
            byte = bytes([o - 0xDC00])
            try:
                return byte.decode("cp1252")
            except UnicodeDecodeError:
                return byte.decode("latin-1")
        return "\ufffd"

    return _LONE_SURROGATE.sub(swap, text), ",".join(record)


def restore_surrogates(text: str, record: str) -> str:
    """The original of a text escaped by :func:`escape_surrogates`, from its record (``""``: nothing to restore).

    Raises:
        ConfigurationError: ``record`` is not such a record, or does not fit ``text``.
    """
    if not record:
        return text
    chars = list(text)
    try:
        for item in record.split(","):
            index, code = item.split(":")
            chars[int(index)] = chr(int(code, 16))
    except (ValueError, IndexError) as exc:
        msg = f"not a surrogate record of this text: {record[:80]!r} ({exc})"
        raise ConfigurationError(msg) from exc
    return "".join(chars)
