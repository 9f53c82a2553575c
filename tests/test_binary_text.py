"""Binary-looking text handed over as ``str`` is refused; real text of every script passes (the threshold of
:func:`llmc_splitters.chunking.inputs.text_binary_reason` is documented there); lone surrogates escape and restore."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest
from door_tree import png_bytes
from hypothesis import given
from hypothesis import strategies as st

from llmc_splitters import ASTChunker, UnsupportedInputError
from llmc_splitters.chunking.inputs import (
    TEXT_SUSPECT_SHARE,
    binary_reason,
    escape_surrogates,
    restore_surrogates,
    text_binary_reason,
)

CJK = Path(sysconfig.get_paths()["stdlib"]) / "test" / "cjkencodings"

EMOJI = "Release notes 🎉\n\n- Faster parsing 🚀 (2x)\n- Fixed 🐛 in the 🇯🇵 locale\n- Thanks 🙏 to 👩‍💻 contributors\n" * 20
CP1252_PUNCTUATION = ("“Smart quotes”, ‘single ones’, an en dash – an em dash — an ellipsis… the euro € and ™, "
                      "• bullets, and œuvre, Œ, Š, ž, Ÿ.\n") * 30
FRENCH = "Le café était très chaud; la crème brûlée, délicieuse. À bientôt, chère amie!\n" * 40


def cjk_texts() -> list[tuple[str, str]]:
    if not CJK.is_dir():
        return []
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(CJK.glob("*-utf8.txt"))]


@pytest.mark.parametrize(("name", "text"), [
    ("emoji", EMOJI), ("cp1252-punctuation", CP1252_PUNCTUATION), ("french", FRENCH),
    ("ansi-colours", "\x1b[31merror\x1b[0m: gauge offline\n" * 50), ("form-feeds", "page one\n\x0cpage two\n" * 40),
    *cjk_texts(),
])
def test_real_text_of_every_script_passes(name, text):
    assert text_binary_reason(text) is None, name
    spans = ASTChunker(max_tokens=64).chunk(text, path=f"{name}.txt")
    assert "".join(s.text for s in spans) == text


def test_the_stdlib_cjk_corpus_is_there():
    if not CJK.is_dir():
        pytest.skip("this Python has no test/cjkencodings directory")
    assert len(cjk_texts()) >= 10


def test_windows_1252_bytes_are_decoded_not_refused():
    data = CP1252_PUNCTUATION.encode("cp1252")
    assert binary_reason(data) is None
    tree = ASTChunker(max_tokens=64).chunk_tree(data, path="notes.txt")
    assert tree.root.metadata["encoding"] == "cp1252" and "".join(s.text for s in tree.leaves) == CP1252_PUNCTUATION


@pytest.mark.parametrize("errors", ["replace", "surrogateescape", "ignore", "latin-1", "cp1252"])
def test_a_png_handed_over_as_text_is_refused_however_it_was_decoded(errors):
    data = png_bytes(64, 64)
    text = data.decode(errors, "replace") if errors in ("latin-1", "cp1252") else data.decode("utf-8", errors)
    reason = text_binary_reason(text)
    assert reason is not None and ("PNG" in reason or "NUL" in reason), (errors, reason)
    with pytest.raises(UnsupportedInputError, match="logo.png: input"):
        ASTChunker().chunk(text, path="logo.png", language="python")  # whatever language is asked for


def test_the_share_threshold():
    body = "x" * 900
    under = body + "\ufffd" * int(len(body) * TEXT_SUSPECT_SHARE * 0.9)  # a text that lost a few characters
    over = body + "\ufffd" * int(len(body) * TEXT_SUSPECT_SHARE * 1.3)
    assert text_binary_reason(under) is None
    assert "replacement characters" in text_binary_reason(over)
    # A legacy-encoded text read as UTF-8 with errors="replace": code with French comments loses a few characters
    # and passes; accent-dense French prose loses one in eight and is refused; Russian in KOI8-R loses nearly every
    # letter and is refused, each with the remedy.
    code = ("def moyenne(valeurs):\n    # Calcule la moyenne des mesures relevées à la marée haute.\n"
            "    return sum(valeurs) / len(valeurs)\n\n") * 20
    assert text_binary_reason(code.encode("cp1252").decode("utf-8", "replace")) is None
    assert "wrong encoding" in text_binary_reason(FRENCH.encode("cp1252").decode("utf-8", "replace"))
    russian = ("Съешь же ещё этих мягких французских булок, да выпей чаю.\n" * 20).encode("koi8-r")
    assert "wrong encoding" in text_binary_reason(russian.decode("utf-8", "replace"))
    # A handful of odd characters is no evidence: short texts are judged by NULs and signatures only.
    assert text_binary_reason("\udce2\udc82") is None and text_binary_reason("x = '\udcff'\n") is None


@given(st.text(alphabet=st.characters(codec=None), max_size=200))
def test_escaped_surrogates_restore_exactly_and_encode(text):
    clean, record = escape_surrogates(text)
    assert len(clean) == len(text), "one character for one: offsets and lines are unchanged"
    assert clean.count("\n") == text.count("\n")
    clean.encode("utf-8")
    assert restore_surrogates(clean, record) == text
    assert (record == "") == (clean == text)


def test_surrogateescaped_bytes_read_as_their_cp1252_characters():
    text = b"caf\xe9 \x93quoted\x94 \xff".decode("utf-8", "surrogateescape")
    clean, record = escape_surrogates(text)
    assert clean == "café “quoted” ÿ" and record == "3:dce9,5:dc93,12:dc94,14:dcff"
