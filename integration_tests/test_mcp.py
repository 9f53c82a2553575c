"""``llmc-splitters mcp`` end to end: the server runs as a subprocess on a copy of real standard-library modules and
is driven by the MCP SDK's own client (``ClientSession`` over ``stdio_client`` and over streamable HTTP).

Lexical only (``--embedding none``): no model is loaded, so each test takes seconds. What is checked is what an agent
relies on: the tools and their schemas, a budgeted ``search_code`` reply (counted here with the index's tokenizer)
that holds the method with its class header and imports, edits and deletions followed with no manual re-index (watch
and refresh modes), 50 concurrent searches over HTTP while a re-index runs, paths outside the root refused, the
bearer token enforced, and a server killed with SIGKILL in the middle of indexing leaving an index that the next
start completes with nothing lost and nothing duplicated.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import STDLIB

mcp = pytest.importorskip("mcp")
pytest.importorskip("watchdog")
anyio = pytest.importorskip("anyio")

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.timeout(180)

FILES = ("json/__init__.py", "json/decoder.py", "json/encoder.py", "json/scanner.py", "textwrap.py", "shlex.py",
         "base64.py", "heapq.py")
TOOLS = {"search_code", "get_symbol", "get_lines", "index_status", "reindex"}
TOKEN = "t0k3n-for-the-tests-0123456789"


def _copy(root: Path, files) -> Path:
    for rel in files:
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STDLIB / rel, dest)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return _copy(tmp_path / "src", FILES)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LLMC_MCP_TOKEN"}
    env.update({"ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, **extra)
    return env


def _args(root: Path, *extra: str) -> list[str]:
    return ["-m", "llmc_splitters", "mcp", str(root), "--embedding", "none", *extra]


@contextlib.asynccontextmanager
async def stdio_session(root: Path, *extra: str):
    params = StdioServerParameters(command=sys.executable, args=_args(root, *extra), env=_env(),
                                   cwd=str(root.parent))
    with open(root.parent / "server-stderr.log", "a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(root: Path, *extra: str, env: dict[str, str] | None = None):
    """The server as a plain subprocess (so a test can SIGKILL it), serving streamable HTTP; yields (url, proc)."""
    port = _free_port()
    log = open(root.parent / f"http-{port}.log", "w", encoding="utf-8")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, *_args(root, "--http", str(port), *extra)], env=env or _env(),
                            stdout=subprocess.DEVNULL, stderr=log, cwd=str(root.parent))
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the server did not start: {(root.parent / f'http-{port}.log').read_text()}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None = None):
    import httpx2

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def call(session, tool: str, **arguments):
    return await session.call_tool(tool, arguments)


async def status(session) -> dict:
    res = await call(session, "index_status")
    assert not res.is_error, res.content[0].text
    return res.structured_content


async def caught_up(session, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        st = await status(session)
        if st["caught_up"] and not st["refreshing"] and not st["pending_changes"]:
            return st
        assert time.monotonic() < deadline, st
        await anyio.sleep(0.1)


def _reply_tokens(res, cl100k) -> int:
    """Tokens of everything the reply carries: its text blocks and its structured content as compact JSON."""
    text = sum(cl100k.count(c.text) for c in res.content)
    data = json.dumps(res.structured_content, ensure_ascii=False, separators=(",", ":"))
    return text + cl100k.count(data)


def _one_sentence(res) -> str:
    assert res.is_error
    text = res.content[0].text
    assert "\n" not in text and "Traceback" not in text and "pydantic" not in text, text
    return text


# ------------------------------------------------------------------------------------------------- tests


def test_tools_and_schemas(tree, cl100k):
    async def main():
        async with stdio_session(tree, "--freshness", "off") as s:
            listed = (await s.list_tools()).tools
            # What every agent pays on connecting: 3,652 tokens before issue 22, item 10 (schemas with titles and
            # null branches, output schemas, long descriptions); now what an agent needs to call each tool.
            dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed]
            assert cl100k.count(json.dumps(dumped)) <= 900
            assert "title" not in json.dumps([t["inputSchema"] for t in dumped])
            tools = {t.name: t for t in listed}
            assert set(tools) == TOOLS
            search = tools["search_code"]
            props = search.input_schema["properties"]
            assert set(props) == {"query", "max_tokens", "k", "path", "language", "dense_fallback"}
            assert props["dense_fallback"]["type"] == "boolean" and props["dense_fallback"]["default"] is False
            assert search.input_schema["required"] == ["query"]
            assert "8000" in props["max_tokens"]["description"] and "25000" in props["max_tokens"]["description"]
            assert set(tools["get_symbol"].input_schema["properties"]) == {"name", "path"}
            assert tools["get_symbol"].input_schema["required"] == ["name"]
            assert set(tools["get_lines"].input_schema["properties"]) == {"path", "start", "end"}
            assert tools["get_lines"].input_schema["required"] == ["path", "start"]
            assert tools["index_status"].input_schema.get("properties", {}) == {}
            assert set(tools["reindex"].input_schema["properties"]) == {"paths"}
            for t in tools.values():
                assert len(t.description) > 100 and "  " not in t.description, t.name  # what it returns, and when
                assert t.output_schema is None, t.name  # the facts still come as structuredContent (below)
            assert props["k"] == {"type": "integer", "description": "Hits (default: as many as fit max_tokens).",
                                  "maximum": 50, "minimum": 1}
            assert "first" in search.description and "get_symbol" in search.description
            assert tools["search_code"].annotations.read_only_hint is True
            assert tools["reindex"].annotations.read_only_hint is False

    anyio.run(main)


def test_search_code_returns_the_method_with_its_class_header_and_imports_within_budget(tree, cl100k):
    async def main():
        async with stdio_session(tree, "--freshness", "off", "--hard-cap", "3000") as s:
            await caught_up(s)
            res = await call(s, "search_code", query="iterencode c_make_encoder markers", max_tokens=1500)
            assert not res.is_error, res.content[0].text
            data = res.structured_content
            top = data["hits"][0]
            assert (top["path"], top["symbol"], top["kind"]) == ("json/encoder.py", "JSONEncoder.iterencode", "method")
            assert top["in_context"] is True
            text = res.content[0].text
            assert "class JSONEncoder(object):" in text  # the class header
            assert "from _json import make_encoder as c_make_encoder" in text  # an import the method uses
            assert f"# json/encoder.py:{top['start_line']}" in text or "# json/encoder.py:" in text
            src = (tree / "json/encoder.py").read_text(encoding="utf-8").splitlines(keepends=True)
            assert "".join(src[top["start_line"] - 1 : top["end_line"]]) in text  # the method, verbatim
            assert _reply_tokens(res, cl100k) <= 1500 and data["max_tokens"] == 1500 and not data["clamped"]
            assert 0 <= data["confidence"] <= 1

            for budget in (200, 400, 900):  # every budget holds, the listing included
                res = await call(s, "search_code", query="decode a JSON document", max_tokens=budget, k=6)
                assert not res.is_error, res.content[0].text
                assert _reply_tokens(res, cl100k) <= budget

            res = await call(s, "search_code", query="wrap a paragraph of text", max_tokens=90000)
            assert not res.is_error
            assert res.structured_content["max_tokens"] == 3000 and res.structured_content["clamped"] is True
            assert any("clamped" in n and "3000" in n for n in res.structured_content["notes"])
            assert _reply_tokens(res, cl100k) <= 3000

            res = await call(s, "search_code", query="split a string shell-like", path="json")
            assert all(h["path"].startswith("json/") for h in res.structured_content["hits"])
            res = await call(s, "search_code", query="heap push pop", language="python", k=2)
            assert [h["language"] for h in res.structured_content["hits"]] == ["python", "python"]

            res = await call(s, "get_symbol", name="JSONDecoder.raw_decode")
            assert not res.is_error
            assert "def raw_decode(self, s, idx=0):" in res.content[0].text
            res = await call(s, "get_lines", path="json/decoder.py", start=1, end=3)
            lines = (tree / "json/decoder.py").read_text(encoding="utf-8").splitlines(keepends=True)
            assert res.content[0].text == "# json/decoder.py:1-3\n" + "".join(lines[:3])

    anyio.run(main)


def test_bad_arguments_are_one_sentence_tool_errors_and_the_server_stays_up(tree, tmp_path):
    outside = tmp_path / "secret.py"
    outside.write_text("PASSWORD = 'hunter2'\n", encoding="utf-8")
    (tree / "link.py").symlink_to(outside)  # a symlink out of the root: the walk skips it, reindex refuses it

    async def main():
        async with stdio_session(tree, "--freshness", "off") as s:
            await caught_up(s)
            cases = [
                ("search_code", {"query": "   "}, "query is empty"),
                ("search_code", {"query": "x", "max_tokens": -5}, "max_tokens must be a positive"),
                ("search_code", {"query": "x", "k": 0}, "k must be"),
                ("search_code", {"query": "x", "path": "../"}, "leaves the indexed root"),
                ("search_code", {"query": "x", "language": "klingon"}, "language"),
                ("search_code", {"query": "x", "path": "nowhere"}, "no indexed path starts with 'nowhere/'"),
                # Issue 22, item 10: unknown arguments were ignored, a filter that matched nothing said the words
                # matched nothing, and a wrong type came back as pydantic's report with its URL.
                ("search_code", {"query": "x", "kk": 3}, "search_code got an unknown argument 'kk'; did you mean "
                                                         "'k'? (it takes: dense_fallback, k, language, max_tokens, "
                                                         "path, query)"),
                ("get_lines", {"path": "heapq.py", "start_line": 1}, "get_lines got an unknown argument 'start_line'; "
                                                                     "did you mean 'start'?"),
                ("get_lines", {"path": "heapq.py", "start": 1, "stop": 9}, "unknown argument 'stop'; did you mean "
                                                                           "'end'?"),
                ("index_status", {"verbose": True}, "index_status got an unknown argument 'verbose': it takes no "
                                                    "arguments"),
                ("search_code", {"query": 42}, "search_code: query must be a string, got 42"),
                ("search_code", {"k": 2}, "search_code: query is missing"),
                ("get_lines", {"path": "heapq.py", "start": "one"}, "get_lines: start must be a whole number, got "
                                                                    "'one'"),
                ("search_code", {"query": "x", "language": "go"}, "no indexed file is in the language 'go' (the "
                                                                  "index holds python); or omit language"),
                ("search_code", {"query": "x", "path": "src/json/"}, "no indexed path starts with 'src/json/'; paths "
                                                                     "are stored relative to the indexed root, like "
                                                                     "'json/__init__.py' (try path='json/')"),
                ("get_lines", {"path": "../../etc/passwd", "start": 1}, "leaves the indexed root"),
                ("get_lines", {"path": "/etc/passwd", "start": 1}, "is absolute"),
                ("get_lines", {"path": str(tree / "shlex.py"), "start": 1}, "is absolute"),
                ("get_lines", {"path": "link.py", "start": 1}, "not in the index"),
                ("get_lines", {"path": "json/decodr.py", "start": 1}, "did you mean 'json/decoder.py'"),
                ("get_lines", {"path": "heapq.py", "start": 100000}, "lines; start must be at most"),
                ("get_lines", {"path": "heapq.py", "start": 9, "end": 3}, "is before start"),
                ("get_symbol", {"name": "NoSuchThing"}, "no symbol named"),
                ("get_symbol", {"name": "dedent", "path": "C:\\Windows\\x.py"}, "is absolute"),
                ("reindex", {"paths": ["../outside"]}, "leaves the indexed root"),
                ("reindex", {"paths": ["/etc"]}, "is absolute"),
                ("reindex", {"paths": ["link.py"]}, "points outside the indexed root"),
            ]
            for tool, args, expected in cases:
                res = await call(s, tool, **args)
                text = _one_sentence(res)
                assert expected in text, (tool, args, text)
                assert str(tree) not in text and str(tmp_path) not in text  # no absolute local path leaks
            res = await call(s, "get_lines", path="textwrap.py", start=1)  # still serving
            assert not res.is_error
            st = await status(s)
            assert st["files_indexed"] == len(FILES)
            assert "secret" not in json.dumps(st) and str(tree) not in json.dumps(st)

    anyio.run(main)


@pytest.mark.parametrize("where", ["--db", "cwd"])
def test_missing_index_is_a_tool_error_not_a_crash(tmp_path, where):
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    where_args = ["--db", str(empty / "db")] if where == "--db" else []  # else: no .llmc/ in the cwd or parents

    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-m", "llmc_splitters", "mcp", *where_args],
                                       env=_env(), cwd=str(empty))
        with open(tmp_path / "err.log", "w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    for tool, args in (("search_code", {"query": "anything"}), ("index_status", {}),
                                       ("reindex", {})):
                        text = _one_sentence(await call(s, tool, **args))
                        assert "llmc-splitters" in text, text  # says how to get an index
                        assert str(tmp_path) not in text
                    assert not (empty / "db").exists()  # asking never creates an index

    anyio.run(main)


def test_unreachable_chroma_server_is_a_tool_error_and_the_server_stays_up(tmp_path):
    """A hybrid index whose vectors are to be read from a Chroma server that does not answer (``--host``)."""
    pytest.importorskip("numpy", reason="needs the default embedding (numpy) to build a hybrid index")
    _copy(tmp_path / "tree", ["textwrap.py"])
    subprocess.run([sys.executable, "-m", "llmc_splitters", "index", str(tmp_path / "tree"), "--db",
                    str(tmp_path / "db"), "--embedding", "code-static", "-q"], env=_env(), check=True, timeout=170,
                   stdout=subprocess.DEVNULL)

    async def main():
        params = StdioServerParameters(
            command=sys.executable, env=_env(), cwd=str(tmp_path),
            args=["-m", "llmc_splitters", "mcp", "--db", str(tmp_path / "db"), "--host", "127.0.0.1", "--port",
                  str(_free_port())])
        with open(tmp_path / "err.log", "w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    for _ in range(2):  # asked again: the server tries again, and is still up
                        text = _one_sentence(await call(s, "search_code", query="anything"))
                        assert "Chroma" in text and "server" in text, text
                        assert str(tmp_path) not in text
                    assert {t.name for t in (await s.list_tools()).tools} == TOOLS

    anyio.run(main)


def _append(path: Path, code: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(code)


NEW_FUNCTION = "\n\ndef frobnicate_widgets(count):\n    \"\"\"Frobnicate count widgets.\"\"\"\n    return count * 2\n"


@pytest.mark.parametrize("mode", ["watch", "refresh"])
def test_edits_and_deletions_are_followed_without_a_manual_reindex(tree, mode):
    async def found(s, query, path):
        res = await call(s, "search_code", query=query, k=3)
        assert not res.is_error, res.content[0].text
        return any(h["path"] == path for h in res.structured_content["hits"]), res

    async def eventually(predicate, timeout=30):
        deadline = time.monotonic() + timeout
        while not await predicate():
            assert time.monotonic() < deadline
            await anyio.sleep(0.1)

    async def main():
        async with stdio_session(tree, "--freshness", mode, "--debounce", "0.2") as s:
            await caught_up(s)
            assert not (await found(s, "frobnicate_widgets", "textwrap.py"))[0]
            _append(tree / "textwrap.py", NEW_FUNCTION)
            (tree / "shlex.py").unlink()
            if mode == "refresh":
                # Checked before the request: the very next search sees both changes.
                ok, res = await found(s, "frobnicate_widgets", "textwrap.py")
                assert ok and res.structured_content["hits"][0]["symbol"] == "frobnicate_widgets"
            else:
                await eventually(lambda: _first(found(s, "frobnicate_widgets", "textwrap.py")))
            await eventually(lambda: _not(found(s, "shlex split posix punctuation_chars lexer", "shlex.py")))
            res = await call(s, "get_lines", path="shlex.py", start=1)
            assert "not in the index" in _one_sentence(res)
            st = await caught_up(s)
            assert st["files_indexed"] == len(FILES) - 1 and st["freshness"] == mode
            res = await call(s, "get_symbol", name="frobnicate_widgets")
            assert "return count * 2" in res.content[0].text

    anyio.run(main)


async def _first(coro) -> bool:
    return (await coro)[0]


async def _not(coro) -> bool:
    return not (await coro)[0]


def test_fifty_concurrent_searches_over_http_while_a_reindex_runs(tree):
    old = {rel: (tree / rel).read_text(encoding="utf-8") for rel in FILES}
    queries = ["decode a JSON document", "wrap text", "base64 encode bytes", "heap push pop", "shell split",
               "scanner make_scanner", "encode basestring ascii", "dedent common leading whitespace"]

    def consistent(res) -> bool:
        """Every verbatim piece of the context is text of the file as it was or as it is now, never of a file
        half written (skeletons are not verbatim and are left out)."""
        text = res.content[0].text
        pieces = re.split(r"^# (\S+):\d+-\d+( \(skeleton\))?( \(truncated\))?\n", text, flags=re.MULTILINE)
        # re.split gives [head, path, skeleton, truncated, body, path, ...]
        for i in range(1, len(pieces), 4):
            path, skeleton, body = pieces[i], pieces[i + 1], pieces[i + 3].rstrip("\n")
            if skeleton:
                continue
            new = old[path] + f"\n\ndef marker_{Path(path).stem}():\n    pass\n"
            if body not in old[path] and body not in new:
                return False
        return len(pieces) > 1

    async def main(url):
        async with http_session(url) as s:
            await caught_up(s)
            for rel in FILES:  # every file changes: the reindex has real work (re-chunk, rewrite) to do
                _append(tree / rel, f"\n\ndef marker_{Path(rel).stem}():\n    pass\n")
            results: list = []

            async def search(i: int) -> None:
                results.append(await call(s, "search_code", query=queries[i % len(queries)], max_tokens=1200))

            reindexed: list = []

            async def reindex() -> None:
                reindexed.append(await call(s, "reindex"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(reindex)
                for i in range(50):
                    tg.start_soon(search, i)
            assert len(results) == 50
            assert all(not r.is_error and r.structured_content["hits"] for r in results)
            bad = [r for r in results if not consistent(r)]
            assert not bad, [(r.structured_content["hits"], r.content[0].text[:3000]) for r in bad[:1]]
            counts = reindexed[0].structured_content["counts"]
            assert counts["updated"] == len(FILES), counts
            res = await call(s, "search_code", query="marker_heapq")
            assert res.structured_content["hits"][0]["symbol"] == "marker_heapq"

    # Freshness off: the reindex call is what re-indexes (no search triggers a refresh of its own).
    with http_server(tree, "--freshness", "off") as (url, _proc):
        anyio.run(main, url)


def test_http_token_is_checked_on_every_request_when_remote_is_allowed(tree):
    import httpx2

    async def main(url):
        async with httpx2.AsyncClient() as client:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN}):
                r = await client.post(url, json=body, headers={"Accept": "application/json, text/event-stream",
                                                               **headers})
                assert r.status_code == 401, (headers, r.status_code)
                assert r.headers["www-authenticate"].startswith("Bearer")
        async with http_session(url, TOKEN) as s:
            assert {t.name for t in (await s.list_tools()).tools} == TOOLS
            assert not (await call(s, "search_code", query="wrap text")).is_error

    # Loopback, with the non-loopback flag forced: the token rules of a public bind apply.
    with http_server(tree, "--freshness", "off", "--allow-remote", env=_env(LLMC_MCP_TOKEN=TOKEN)) as (url, _p):
        anyio.run(main, url)


@pytest.mark.parametrize(("extra", "env", "expected"), [
    (["--bind", "0.0.0.0"], {}, "refusing to listen on 0.0.0.0"),
    (["--allow-remote"], {}, "needs a bearer token"),
    (["--allow-remote"], {"LLMC_MCP_TOKEN": "short"}, "too short"),
])
def test_unsafe_http_settings_refuse_to_start(tree, extra, env, expected):
    out = subprocess.run([sys.executable, *_args(tree, "--http", str(_free_port()), *extra)], env=_env(**env),
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out.stderr
    assert expected in out.stderr


BIG = FILES + ("textwrap.py", "argparse.py", "shlex.py", "heapq.py", "base64.py", "dataclasses.py", "string.py",
               "tomllib/_parser.py", "email/_header_value_parser.py", "email/message.py", "email/utils.py",
               "email/feedparser.py", "email/generator.py", "email/header.py", "email/_policybase.py",
               "asyncio/base_events.py", "asyncio/events.py", "asyncio/futures.py", "asyncio/locks.py",
               "asyncio/queues.py", "asyncio/streams.py", "asyncio/tasks.py", "asyncio/transports.py",
               "http/client.py", "http/server.py", "http/cookiejar.py", "logging/__init__.py", "logging/handlers.py",
               "unittest/case.py", "unittest/mock.py", "urllib/parse.py", "urllib/request.py", "zipfile.py",
               "tarfile.py", "inspect.py", "typing.py", "pathlib.py", "subprocess.py", "configparser.py")


def test_sigkill_during_indexing_then_restart_loses_nothing_and_duplicates_nothing(tmp_path):
    root = _copy(tmp_path / "big", sorted(set(BIG)))
    expected = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))

    async def watch_until_partial(url) -> int:
        async with http_session(url) as s:
            deadline = time.monotonic() + 120
            while True:
                st = await status(s)
                if 0 < st["files_indexed"] < len(expected) and st["refreshing"]:
                    return st["files_indexed"]
                assert not st["caught_up"], "indexing finished before the test could interrupt it"
                assert time.monotonic() < deadline
                await anyio.sleep(0.05)

    async def finish(url) -> dict:
        async with http_session(url) as s:
            return await caught_up(s, timeout=150)

    with http_server(root, "--freshness", "off") as (url, proc):
        partial = anyio.run(watch_until_partial, url)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert partial < len(expected)
    with http_server(root, "--freshness", "off") as (url, _proc):
        st = anyio.run(finish, url)
    assert st["files_indexed"] == len(expected)

    # Read the index the server left behind: every file complete, once, and searchable by every engine.
    from llmc_splitters import ASTChunker
    from llmc_splitters.retrieval import CodeIndex

    index = CodeIndex(root / ".llmc", create=False)
    assert index.paths == expected
    held = index.status()
    assert held["pending"] == [] and held["failed"] == {}
    markers = index.span_store.markers()
    leaf_ids = index.lexical("leaf").ids()
    for rel in expected:
        leaves = index.spans(rel)
        assert len(leaves) == markers[rel].n_leaves  # no orphan or duplicate row
        assert {s.id for s in leaves} <= leaf_ids  # and BM25 holds each of them
    assert index.lexical("leaf").count() == sum(m.n_leaves for m in markers.values())  # once
    chunker = ASTChunker(max_tokens=512, analyze=True)
    for rel in ("json/decoder.py", "typing.py", "zipfile.py"):
        text = (root / rel).read_text(encoding="utf-8")
        assert index.leaf_count(rel) == len(chunker.chunk_tree(text, path=rel).leaves)
        assert "".join(s.text for s in index.spans(rel)) == text  # lossless, nothing lost
