"""The code corpus of the static code embedding (``benchmarks.build_static``): package sources and their views.

Every package comes from a registry at a pinned version, with the ordinary clients (``pip download`` of wheels,
``npm pack``, ``apt-get download``), as :func:`benchmarks.corpus.fetch` does. None is a repository of a benchmark this
project reports: not the docstring benchmark's packages (``benchmarks.corpus.PACKAGES``, tune and held-out), not the
ranking tune set's repositories (``benchmarks/tuneset``), not Semble's code-search repositories (dev or held-out),
not SWE-bench Lite's (all twelve, sympy and django included). The names were checked against those lists; when a
package was in doubt it was left out.

A package's *views* are the texts the index embeds for it, made by the index itself: its files go through
``CodeRetriever.index_texts`` with a recording embedding that bounds like the teacher (``minilm-onnx-128``), so the
spans (``ASTChunker``, 512 tokens), the leaf header (path and symbol), the file and class summaries and the
126-word-piece bound are the index's own. Each view is kept twice: whole (what a static model, which has no window,
embeds at run time) and bounded (what the teacher reads).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .corpus import _JS_EXCLUDE, _PY_EXCLUDE, _TS_EXCLUDE, PackageSpec, fetch, package_files

__all__ = ["CORPUS", "corpus_digest", "fetch_package", "package_views"]

_PY = ("*.py",)
_PYX = (*_PY_EXCLUDE, "*/test_*.py", "*/_vendor/*", "*/vendor/*", "*/testing/*", "*/migrations/*")
_JS = ("package/*.js", "package/*.mjs")
_JSX = (*_JS_EXCLUDE, "*/esm/*", "*/es/*", "*/umd/*", "*/browser/*", "*/bundle*", "*/locale/*", "*/locales/*",
        "*/i18n/*", "*/vendor/*", "*/node_modules/*")
_TS = ("package/src/*.ts", "package/lib/*.ts")
_TSX = (*_TS_EXCLUDE, "*/node_modules/*")
#: Source text at most from one package (a larger package gives a random part of its files).
MAX_BYTES = 1_000_000
_SH_BIN = ("usr/bin/*", "usr/sbin/*", "bin/*", "sbin/*")


def _py(name: str, version: str, *include: str) -> PackageSpec:
    return PackageSpec("python", "wheel", name, version, "static", include or _PY, _PYX)


def _js(name: str, version: str, *include: str) -> PackageSpec:
    return PackageSpec("javascript", "npm", name, version, "static", include or _JS, _JSX)


def _built(name: str, version: str, *include: str) -> PackageSpec:
    return PackageSpec("javascript", "npm", name, version, "static", include, ("*.min.js", "*/esm/*", "*/umd/*"))


def _ts(name: str, version: str, *include: str) -> PackageSpec:
    return PackageSpec("typescript", "npm", name, version, "static", include or _TS, _TSX)


def _sh(name: str, version: str, *include: str) -> PackageSpec:
    return PackageSpec("bash", "debian", name, version, "static", include or _SH_BIN)


#: The corpus, pinned (Python as wheels from PyPI: an sdist's metadata needs its build backend, a wheel's sources
#: need nothing). Changing it changes the model (its digest is part of the recipe).
CORPUS: tuple[PackageSpec, ...] = (
    # Python: sdists.
    _py("sqlalchemy", "2.0.36"), _py("networkx", "3.4.2"), _py("jinja2", "3.1.4"), _py("werkzeug", "3.1.3"),
    _py("marshmallow", "3.23.1"), _py("docutils", "0.21.2"), _py("paramiko", "3.5.0"), _py("tornado", "6.4.2"),
    _py("celery", "5.4.0"), _py("kombu", "5.4.2"), _py("more-itertools", "10.5.0"),
    _py("sortedcontainers", "2.4.0"), _py("pyparsing", "3.2.0"), _py("black", "24.10.0"), _py("isort", "5.13.2"),
    _py("jedi", "0.19.2"), _py("parso", "0.8.4"), _py("alembic", "1.14.0"),
    _py("urllib3", "2.2.3"), _py("httpcore", "1.0.7"), _py("h11", "0.14.0"), _py("anyio", "4.6.2.post1"),
    _py("trio", "0.27.0"), _py("websockets", "14.1"), _py("scrapy", "2.12.0"), _py("sqlparse", "0.5.2"),
    _py("tabulate", "0.9.0"), _py("prompt_toolkit", "3.0.48"), _py("typer", "0.15.1"), _py("invoke", "2.2.0"),
    _py("fabric", "3.2.2"), _py("pexpect", "4.9.0"), _py("packaging", "24.2"), _py("coverage", "7.6.9"),
    _py("virtualenv", "20.28.0"), _py("mako", "1.3.8"), _py("gunicorn", "23.0.0"), _py("falcon", "4.0.2"),
    _py("bottle", "0.13.2"), _py("dask", "2024.12.0"), _py("structlog", "24.4.0"), _py("loguru", "0.7.3"),
    _py("pluggy", "1.5.0"), _py("cattrs", "24.1.2"), _py("jsonschema", "4.23.0"), _py("voluptuous", "0.15.2"),
    _py("deepdiff", "8.1.1"), _py("dill", "0.3.9"), _py("cloudpickle", "3.1.0"), _py("joblib", "1.4.2"),
    _py("lark", "1.2.2"), _py("plumbum", "1.9.0"), _py("watchdog", "6.0.0"), _py("apscheduler", "3.11.0"),
    _py("peewee", "3.19.0"), _py("httpie", "3.2.4"), _py("cookiecutter", "2.6.0"), _py("tomlkit", "0.13.2"),
    _py("oauthlib", "3.2.2"),
    _py("pyjwt", "2.10.1"), _py("itsdangerous", "2.2.0"), _py("sanic", "24.6.0"), _py("mypy", "1.13.0"),
    _py("pandas", "2.2.3", "pandas/core/*.py", "pandas/io/*.py"), _py("babel", "2.16.0", "babel/*.py"),
    _py("pygments", "2.18.0", "pygments/*.py"), _py("psutil", "6.1.0", "psutil/*.py"),
    # JavaScript: npm tarballs.
    _js("webpack", "5.97.1"), _js("eslint", "9.17.0"), _js("commander", "12.1.0"), _js("yargs", "17.7.2"),
    _js("moment", "2.30.1", "package/src/*.js"), _js("date-fns", "4.1.0"), _js("ramda", "0.30.1", "package/src/*.js"),
    _js("underscore", "1.13.7", "package/modules/*.js"), _js("bluebird", "3.7.2", "package/js/release/*.js"),
    _js("jquery", "3.7.1", "package/src/*.js"), _js("preact", "10.25.2", "package/src/*.js"),
    _js("svelte", "5.14.0", "package/src/*.js"), _js("ws", "8.18.0"), _js("mongoose", "8.9.0"),
    _js("sequelize", "6.37.5"), _js("knex", "3.1.0"), _js("fastify", "5.2.0"), _js("@hapi/hapi", "21.3.12"),
    _js("joi", "17.13.3"), _js("luxon", "3.5.0", "package/src/*.js"), _js("handlebars", "4.7.8", "package/lib/*.js"),
    _js("markdown-it", "14.1.0", "package/lib/*.mjs"), _js("semver", "7.6.3"), _js("fs-extra", "11.2.0"),
    _js("debug", "4.4.0", "package/src/*.js"), _js("pino", "9.5.0"), _js("winston", "3.17.0"),
    _js("superagent", "10.1.1", "package/lib/*.js"), _js("jsdom", "25.0.1"), _js("core-js", "3.39.0"),
    _js("three", "0.171.0", "package/src/math/*.js", "package/src/core/*.js", "package/src/loaders/*.js"),
    _js("chokidar", "3.6.0"), _js("graphql", "16.9.0", "package/*.mjs"),
    _js("@babel/traverse", "7.26.4", "package/lib/*.js"), _js("n", "10.1.0", "package/bin/n"),
    # Compiled JavaScript of TypeScript packages that ship no sources (CommonJS builds only: one copy each).
    _built("fp-ts", "2.16.9", "package/lib/*.js"), _built("io-ts", "2.2.22", "package/lib/*.js"),
    _built("@sinclair/typebox", "0.34.13", "package/build/cjs/*.js"), _built("yaml", "2.6.1", "package/dist/*.js"),
    _built("class-validator", "0.14.1", "package/cjs/*.js"), _built("kysely", "0.27.5", "package/dist/cjs/*.js"),
    _built("lit-html", "3.2.1", "package/development/*.js"), _built("inversify", "6.2.1", "package/lib/*.js"),
    # TypeScript: packages that ship their .ts sources, and declaration files written by hand (with their docs).
    _ts("effect", "3.11.7", "package/src/*.ts"), _ts("ajv", "8.17.1", "package/lib/*.ts"),
    PackageSpec("typescript", "npm", "type-fest", "4.30.2", "static", ("package/source/*.d.ts",)),
    PackageSpec("typescript", "npm", "@types/node", "22.10.2", "static", ("node/*.d.ts",), ("*/ts5.6/*",)),
    # Shell: Debian packages whose payload is shell scripts (files without a shell shebang are skipped).
    _sh("devscripts", "2.23.4+deb12u2"), _sh("git-extras", "6.5.0-1"), _sh("dehydrated", "0.7.0-3"),
    _sh("xdg-utils", "1.1.3-4.1"), _sh("dkms", "3.0.10-8+deb12u1"), _sh("debianutils", "5.7-0.5~deb12u1"),
    _sh("initramfs-tools-core", "0.142+deb12u3", "usr/share/initramfs-tools/*", *_SH_BIN),
    _sh("grub-common", "2.06-13+deb12u2", "etc/grub.d/*", "usr/share/grub/*", *_SH_BIN),
    _sh("console-setup", "1.221"), _sh("os-prober", "1.81", "usr/lib/os-probes/*", "usr/lib/linux-boot-probes/*",
                                        "usr/share/os-prober/*", *_SH_BIN),
    _sh("live-build", "1:20230502", "usr/lib/live/build/*", "usr/share/live/build/functions/*", *_SH_BIN),
    _sh("live-boot", "1:20230131+deb12u1", "usr/lib/live/boot/*", "lib/live/boot/*", *_SH_BIN),
    _sh("pbuilder", "0.231", "usr/lib/pbuilder/*", "usr/share/doc/pbuilder/examples/*", *_SH_BIN),
    _sh("quilt", "0.67+really0.66-1", "usr/share/quilt/*", *_SH_BIN),
    _sh("debootstrap", "1.0.128+nmu2+deb12u2", "usr/share/debootstrap/*", *_SH_BIN),
    _sh("cryptsetup-initramfs", "2:2.6.1-4~deb12u2", "usr/share/initramfs-tools/*", "usr/lib/cryptsetup/*"),
    _sh("makeself", "2.4.5-1", "usr/share/makeself/*", *_SH_BIN), _sh("shunit2", "2.1.8-3", "usr/share/shunit2/*"),
    _sh("kdump-tools", "1:1.8.1", "usr/share/kdump-tools/*", *_SH_BIN), _sh("ucf", "3.0043+nmu1+deb12u1"),
)


def corpus_digest(corpus: tuple[PackageSpec, ...] = CORPUS) -> str:
    """A digest of the pinned corpus (registry, name, version, globs of every package)."""
    text = json.dumps([[s.language, s.registry, s.name, s.version, s.include, s.exclude] for s in corpus])
    return hashlib.sha256(text.encode()).hexdigest()


class _Recorder:
    """An embedding the index bounds like ``teacher`` that records what it is given instead of embedding it."""

    def __init__(self, teacher: Any) -> None:
        self.teacher = teacher
        self.name = "static-build-recorder"
        self.max_input_tokens = teacher.max_input_tokens
        self.count_tokens = teacher.count_tokens
        self.cut = teacher.cut
        self.whole: dict[str, str] = {}  # bounded view -> the whole text it was cut from
        self.bounded: list[str] = []

    def bound(self, text: str, max_tokens: int) -> tuple[int, int]:
        end, n = self.teacher.bound(text, max_tokens)
        self.whole.setdefault(text[:end], text)
        return end, n

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.bounded.extend(texts)
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


def package_views(spec: PackageSpec, cache: Path, teacher: Any, log: Callable[[str], None], *,
                  max_bytes: int = MAX_BYTES) -> list[list[str]]:
    """``[whole, bounded]`` of every view the index embeds for the package's files (cached in ``cache/views``); of a
    package larger than ``max_bytes``, files drawn at random (seeded by its name) up to that size."""
    from llmc_splitters.retrieval import CodeRetriever

    out = cache / "views" / f"{_slug(spec)}.json"
    if out.is_file():
        return json.loads(out.read_text(encoding="utf-8"))
    root, version = fetch_package(spec, cache / "packages")
    files = package_files(spec, root)
    random.Random(spec.key).shuffle(files)
    size, kept = 0, []
    for rel, text in files:
        if size >= max_bytes:
            break
        kept.append((rel, text))
        size += len(text)
    files = sorted(kept)
    rec = _Recorder(teacher)
    r = CodeRetriever(embedding=rec, collection=f"static_{_slug(spec)}"[:60])
    # Paths as the index would see them in a checkout of the project: without the archive's top folder.
    texts = {_strip_top(spec, rel): text for rel, text in files}
    try:
        r.index_texts(texts)
    finally:
        r.close() if hasattr(r, "close") else None
    views = [[rec.whole.get(b, b), b] for b in rec.bounded]
    log(f"  {spec.key:40s} {version:24s} {len(files):5d} files {len(views):6d} views")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(views), encoding="utf-8")
    tmp.replace(out)
    return views


def fetch_package(spec: PackageSpec, cache: Path) -> tuple[Path, str]:
    """Download and unpack one package once (``benchmarks.corpus.fetch``; a Python wheel here); its root and version."""
    if spec.registry != "wheel":
        return fetch(spec, cache)
    root = cache / _slug(spec)
    done = root / ".done"
    if done.exists():
        return root / "x", done.read_text().strip()
    shutil.rmtree(root, ignore_errors=True)
    dl = root / "dl"
    dl.mkdir(parents=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q", "-d",
                           str(dl), f"{spec.name}=={spec.version}"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        msg = f"pip download {spec.key} failed: {proc.stderr[-1500:]}"
        raise RuntimeError(msg)
    with zipfile.ZipFile(next(dl.glob("*.whl"))) as zf:
        zf.extractall(root / "x")
    shutil.rmtree(dl, ignore_errors=True)
    done.write_text(spec.version)
    return root / "x", spec.version


def _strip_top(spec: PackageSpec, rel: str) -> str:
    """The path in the package as its checkout has it (npm tarballs put everything under ``package/``)."""
    if spec.registry == "npm" and "/" in rel:
        return rel.split("/", 1)[1]
    return rel


def _slug(spec: PackageSpec) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{spec.registry}-{spec.name}-{spec.version}")
