"""The MCP face of :class:`~llmc_splitters.mcp.service.CodeService`: tools, schemas, transports, the HTTP token.

Built on the official ``mcp`` SDK (``MCPServer``). Each tool is a thin function that calls the service and turns
its :class:`~llmc_splitters.mcp.replies.Reply` into a ``CallToolResult`` (the text, plus the same facts as
``structuredContent`` under the tool's output schema), and every failure into a tool error (``isError``) with one
sentence: the server keeps serving. Tool functions are synchronous, so the SDK runs each call in a worker thread
and concurrent calls do not wait on one another's I/O.

Transports: stdio (:func:`run_stdio`), or streamable HTTP (:func:`run_http`) on 127.0.0.1 by default. Any other
interface needs ``allow_remote=True`` and a bearer token, which :class:`BearerAuth` checks on every HTTP request
(it also checks it on loopback when one is given).
"""

# No `from __future__ import annotations`: the SDK reads the tool functions' annotations, which use local values.

import hmac
import ipaddress
import logging
from typing import Annotated, Any

from ..errors import ConfigurationError, LlmcError, missing_dependency
from .replies import Reply
from .service import CodeService

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import BaseModel, Field
except ImportError as exc:  # pragma: no cover - the [mcp] extra installs them
    raise missing_dependency("mcp", "mcp") from exc

__all__ = ["BearerAuth", "build_server", "http_app", "is_loopback", "run_http", "run_stdio"]

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16


# --------------------------------------------------------------------------------------------- schemas


class Hit(BaseModel):
    """One ranked hit."""

    path: str | None = Field(description="File path relative to the indexed root.")
    start_line: int = Field(description="First line of the hit (1-based).")
    end_line: int = Field(description="Last line of the hit (inclusive).")
    symbol: str | None = Field(description="Qualified name of the definition (Class.method), if it is one.")
    kind: str = Field(description="function, method, class, block, section, ...")
    language: str | None = Field(description="The file's language.")
    score: float = Field(description="Fused rank score (higher is better).")
    in_context: bool = Field(description="Whether the hit's text is in the reply's context (false: over budget).")


class SearchOutput(BaseModel):
    """What search_code returns besides the context text."""

    confidence: float = Field(description="How clearly the top hit beats the rest, 0..1; under ~0.6: rephrase.")
    hits: list[Hit]
    context_tokens: int = Field(description="Tokens of the context part of the text.")
    max_tokens: int = Field(description="The budget the whole reply (text and this data) was held to.")
    clamped: bool = Field(description="True when the requested max_tokens was above the hard cap and clamped.")
    notes: list[str] = Field(description="Clamping and freshness notes.")


class Slice(BaseModel):
    """One exact slice."""

    path: str | None
    start_line: int
    end_line: int
    shown_to: int | None = Field(description="Last line included in the text (null: not included).")


class SliceOutput(BaseModel):
    """What get_symbol and get_lines return besides the text."""

    slices: list[Slice]
    notes: list[str]
    max_tokens: int
    name: str | None = None
    path: str | None = None
    lines_in_file: int | None = None


class StatusOutput(BaseModel):
    """What index_status returns."""

    index: str
    root: str | None
    files_indexed: int
    leaf_spans: int
    last_update: str | None
    freshness: str = Field(description="watch, refresh (checked before each request) or off (read-only).")
    refreshing: bool
    caught_up: bool
    pending_changes: int = Field(description="Changed paths the watcher saw that no refresh has indexed yet.")
    unpublished_files: int = Field(description="Files written to the index whose BM25 postings or vectors are "
                                               "still to be written (a killed run's; the next write replays them).")
    search_ready: bool = Field(description="False until the index is open and its embedding model loaded after "
                                            "start (a search meanwhile waits for them).")
    embedding: str
    search: str
    chunking: dict[str, Any]
    reply_budget: dict[str, int]
    failed_files: dict[str, str]
    failed_count: int
    last_error: str | None
    watch_error: str | None


class ReindexOutput(BaseModel):
    """What reindex returns (path lists capped at 50; counts complete)."""

    added: list[str]
    updated: list[str]
    removed: list[str]
    counts: dict[str, int]
    failed: dict[str, str]
    skipped: dict[str, str]
    not_found: list[str]
    bytes_read: int = Field(description="File content read: files whose size and modification time match the "
                                        "index are not read.")
    seconds: float


# ----------------------------------------------------------------------------------------------- tools


def _result(reply: Reply) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=reply.text)], structured_content=reply.data)


def _error(text: str) -> CallToolResult:
    # One line: a store's own message (chromadb's) may span several.
    return CallToolResult(content=[TextContent(type="text", text=" ".join(text.split()))], is_error=True)


def _guarded(service: CodeService, call: Any) -> CallToolResult:
    """Run one tool call; every failure becomes a tool error with one sentence, and the server stays up."""
    try:
        return _result(call())
    except LlmcError as exc:  # a bad request, or the index refused (a store failure): the message is for people
        return _error(service.scrub(str(exc)))
    except Exception as exc:
        log.exception("tool call failed")
        return _error(f"internal error ({type(exc).__name__}); the server logged the details and keeps serving: "
                      "try again, or call index_status")


def build_server(service: CodeService, *, name: str = "llmc-splitters") -> MCPServer:
    """An ``MCPServer`` with the five tools over ``service``.

    Example:
        >>> server = build_server(CodeService(lambda: retriever, freshness="off"))     # doctest: +SKIP
        >>> server.run()                                                               # doctest: +SKIP
    """
    from .. import __version__

    s = service.settings
    app: MCPServer = MCPServer(
        name,
        version=__version__,
        instructions=(
            "Code search over one indexed source tree. Start with search_code for any question about the code; "
            "it returns the best-matching code with its class header and imports, within a token budget. Use "
            "get_symbol for a definition you know by name and get_lines to read exact lines. Paths are relative "
            "to the indexed root. The index follows edits by itself; index_status says how fresh it is."
        ),
        log_level="WARNING",
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def search_code(
        query: Annotated[str, Field(description="What to find: a question in words, identifiers, a line of code "
                                                "or an error message.")],
        max_tokens: Annotated[int | None, Field(
            description=f"Token budget of the whole reply. Default {s.max_tokens}; at most {s.hard_cap} (larger "
                        "values are clamped and the reply says so).",
            json_schema_extra={"minimum": 1})] = None,
        k: Annotated[int | None, Field(description=f"How many hits to return and expand. Default {s.k}, at most "
                                                   f"{s.max_k}.", json_schema_extra={"minimum": 1,
                                                                                     "maximum": s.max_k})] = None,
        path: Annotated[str | None, Field(description="Only files under this directory or file, relative to the "
                                                      "indexed root (e.g. 'src/http').")] = None,
        language: Annotated[str | None, Field(description="Only files in this language: python, javascript, "
                                                          "typescript, bash, go, rust, markdown, ...")] = None,
    ) -> Annotated[CallToolResult, SearchOutput]:
        """Search the indexed code base and get back the code that answers the query, ready to read.

        Use it first for any question about this code base: where something is handled, how a feature works,
        where an identifier is defined or used, what raises an error message. The reply lists the ranked hits
        (path, lines, symbol, kind, score) and a confidence, then the context: each hit with the header or
        skeleton of its class and the imports and module-level names it uses, each piece under a
        '# path:start-end' marker. The whole reply stays within max_tokens tokens. A confidence under about
        0.6 means no hit stands out: rephrase with identifiers, or narrow with path or language. For a
        definition you know by name use get_symbol; to read exact lines use get_lines.
        """
        return _guarded(service, lambda: service.search_code(query, max_tokens, k, path, language))

    def get_symbol(
        name: Annotated[str, Field(description="Function, class or method name, qualified like 'Class.method' "
                                               "(a bare 'method' also matches 'Class.method').")],
        path: Annotated[str | None, Field(description="Only in this file, relative to the indexed root, as "
                                                      "search_code reports it.")] = None,
    ) -> Annotated[CallToolResult, SliceOutput]:
        """Get the exact source of a function, class or method by name, straight from the index (no search).

        Use it when you know the name, from a search_code hit or from code you read. Every definition with that
        name is returned whole, under a '# path:start-end' marker, as long as the reply fits the server's
        default budget; a longer one is cut at a line, and the reply names the get_lines call that continues it.
        """
        return _guarded(service, lambda: service.get_symbol(name, path))

    def get_lines(
        path: Annotated[str, Field(description="File path relative to the indexed root, as search_code reports "
                                               "it.")],
        start: Annotated[int, Field(description="First line to return (1 is the first line of the file).",
                                    json_schema_extra={"minimum": 1})],
        end: Annotated[int | None, Field(description="Last line to return, inclusive; default: the end of the "
                                                     "file.", json_schema_extra={"minimum": 1})] = None,
    ) -> Annotated[CallToolResult, SliceOutput]:
        """Get exact lines of an indexed file, from the index (never from disk).

        Use it to read around a search hit, to see a whole file, or to continue a slice that was cut to fit the
        budget. Lines are 1-based and inclusive. The reply holds at most the server's default budget; a longer
        range is cut at a line and the reply says where to continue.
        """
        return _guarded(service, lambda: service.get_lines(path, start, end))

    def index_status() -> Annotated[CallToolResult, StatusOutput]:
        """Say what the index holds and how fresh it is.

        Returns the number of files indexed, the last update, changes not indexed yet, whether a refresh is
        running, the embedding model and chunking settings, and the files that could not be indexed. Use it
        when results look stale or a file seems to be missing, before calling reindex.
        """
        return _guarded(service, service.index_status)

    def reindex(
        paths: Annotated[list[str] | None, Field(description="Files or directories to bring up to date, relative "
                                                             "to the indexed root; default: the whole tree.")] = None,
    ) -> Annotated[CallToolResult, ReindexOutput]:
        """Bring the index up to date with the files on disk now, and report what changed.

        Normally not needed: the server follows edits by itself. Use it after a large change (a branch switch,
        a generated tree), or when index_status shows pending changes you need now. Only files inside the
        indexed root that its rules select (not ignored, not binary) are indexed.
        """
        return _guarded(service, lambda: service.reindex(paths))

    app.add_tool(search_code, annotations=read_only)
    app.add_tool(get_symbol, annotations=read_only)
    app.add_tool(get_lines, annotations=read_only)
    app.add_tool(index_status, annotations=read_only)
    app.add_tool(reindex, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                      idempotent_hint=True, open_world_hint=False))
    return app


# ------------------------------------------------------------------------------------------ transports


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``127.0.0.1``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``, else 401.

    Compared in constant time. Lifespan events pass through.

    Example:
        >>> app = BearerAuth(inner_app, token="a-long-random-secret")            # doctest: +SKIP
    """

    def __init__(self, app: Any, token: str) -> None:
        if len(token) < MIN_TOKEN_CHARS:
            msg = f"the bearer token must be at least {MIN_TOKEN_CHARS} characters"
            raise ConfigurationError(msg)
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") in ("http", "websocket"):
            got = b""
            for key, value in scope.get("headers") or ():
                if key.lower() == b"authorization":
                    got = value
                    break
            if not hmac.compare_digest(got, self._expected):
                body = b'{"error":"missing or wrong bearer token: send Authorization: Bearer <token>"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="llmc-splitters"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, *, host: str, token: str | None) -> Any:
    """The streamable-HTTP ASGI app at ``/mcp``, behind :class:`BearerAuth` when a token is given.

    On a loopback host the SDK's DNS-rebinding protection (Host and Origin checks) stays on.
    """
    app = server.streamable_http_app(host=host)
    return BearerAuth(app, token) if token else app


def check_http_settings(host: str, *, allow_remote: bool, token: str | None) -> None:
    """Refuse unsafe HTTP settings before anything listens.

    Raises:
        ConfigurationError: A non-loopback ``host`` without ``allow_remote``, or ``allow_remote`` without a token
            of at least :data:`MIN_TOKEN_CHARS` characters.
    """
    if not is_loopback(host) and not allow_remote:
        msg = (f"refusing to listen on {host}: only 127.0.0.1 is served by default; to accept other machines pass "
               "--allow-remote and set a bearer token in $LLMC_MCP_TOKEN")
        raise ConfigurationError(msg)
    if allow_remote and not token:
        msg = "--allow-remote needs a bearer token: set $LLMC_MCP_TOKEN (at least 16 random characters)"
        raise ConfigurationError(msg)
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        msg = f"$LLMC_MCP_TOKEN is too short: use at least {MIN_TOKEN_CHARS} random characters"
        raise ConfigurationError(msg)


def _quiet_libraries() -> None:
    # Libraries that log each request at INFO or DEBUG through the SDK's root handler: noise on the server's stderr.
    for name in ("chromadb", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)


def run_stdio(service: CodeService) -> None:
    """Serve over stdin/stdout until the client closes them."""
    server = build_server(service)
    _quiet_libraries()
    service.start()
    try:
        server.run()
    finally:
        service.stop(wait=5)  # a refresh that is writing finishes its group (it would be redone anyway)


def run_http(service: CodeService, *, host: str, port: int, allow_remote: bool = False,
             token: str | None = None) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted.

    Raises:
        ConfigurationError: See :func:`check_http_settings`.
    """
    import uvicorn

    check_http_settings(host, allow_remote=allow_remote, token=token)
    app = http_app(build_server(service), host=host, token=token)
    _quiet_libraries()
    service.start()
    try:
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")).run()
    finally:
        service.stop(wait=5)  # a refresh that is writing finishes its group (it would be redone anyway)
