"""The MCP face of :class:`~llmc_splitters.mcp.service.CodeService`: tools, schemas, transports, the HTTP token.

Built on the official ``mcp`` SDK (``MCPServer``). Each tool is a thin function that calls the service and turns
its :class:`~llmc_splitters.mcp.replies.Reply` into a ``CallToolResult`` (the text, plus the same facts as JSON in
``structuredContent``), and every failure into a tool error (``isError``) with one sentence: the server keeps
serving. Arguments are checked as the Python API checks its own: one a tool does not take, or of the wrong type,
is a tool error naming it (and the nearest valid name). The tool list is kept to what an agent reads to call a
tool (about 900 cl100k tokens). Tool functions are synchronous, so the SDK runs each call in a worker thread and
concurrent calls do not wait on one another's I/O.

Transports: stdio (:func:`run_stdio`), or streamable HTTP (:func:`run_http`) on 127.0.0.1 by default. Any other
interface needs ``allow_remote=True`` and a bearer token, which :class:`BearerAuth` checks on every HTTP request
(it also checks it on loopback when one is given).
"""

# No `from __future__ import annotations`: the SDK reads the tool functions' annotations, which use local values.

import hmac
import inspect
import ipaddress
import logging
import warnings
from typing import Annotated, Any

from ..errors import ConfigurationError, FilterWarning, LlmcError, missing_dependency, unknown_argument
from .replies import Reply
from .service import CodeService

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field, ValidationError
except ImportError as exc:  # pragma: no cover - the [mcp] extra installs them
    raise missing_dependency("mcp", "mcp") from exc

__all__ = ["BearerAuth", "build_server", "http_app", "is_loopback", "run_http", "run_stdio"]

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16


# ----------------------------------------------------------------------------------------------- server


class _Server(MCPServer):
    """``MCPServer`` whose tool calls are checked as the Python API checks its arguments, and whose tool list is
    compact.

    * An argument a tool does not take is a tool error naming the nearest valid one (``kk`` -> ``k``), as
      :func:`~llmc_splitters.errors.unknown_argument` does for the Python API; the SDK would drop it silently.
    * An argument of the wrong type is a tool error in one sentence (``query must be a string, got 42``), not
      pydantic's report with its URL.
    * ``tools/list`` carries what an agent needs to call a tool: its description and its arguments' types,
      bounds and descriptions; pydantic's titles and ``anyOf`` null branches are left out (an optional argument
      is one that is not required).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._arguments: dict[str, tuple[str, ...]] = {}

    def add_tool(self, fn: Any, **kwargs: Any) -> None:
        # The docstring as one paragraph: its indentation would be sent (and counted) with every tool list.
        kwargs.setdefault("description", " ".join((fn.__doc__ or "").split()))
        super().add_tool(fn, **kwargs)
        self._arguments[kwargs.get("name") or fn.__name__] = tuple(inspect.signature(fn).parameters)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        valid = self._arguments.get(name)
        if valid is not None:
            for arg in arguments:
                if arg not in valid:
                    raise ToolError(str(unknown_argument(name, arg, valid)))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(_bad_arguments(name, exc.__cause__)) from None
            raise

    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        return [t.model_copy(update={"input_schema": _compact(t.input_schema)}) for t in tools]


_EXPECTED = {"string_type": "a string", "int_type": "a whole number", "int_parsing": "a whole number",
             "int_from_float": "a whole number", "list_type": "a list", "bool_type": "true or false",
             "bool_parsing": "true or false"}


def _bad_arguments(tool: str, error: ValidationError) -> str:
    """One sentence for the arguments pydantic rejected: which, what they must be, what was sent."""
    said = []
    for e in error.errors():
        arg = ".".join(str(part) for part in e["loc"]) or "the arguments"
        if e["type"] == "missing":
            said.append(f"{arg} is missing")
            continue
        sent = repr(e.get("input"))
        sent = sent if len(sent) <= 40 else sent[:37] + "..."
        expected = _EXPECTED.get(e["type"])
        said.append(f"{arg} must be {expected}, got {sent}" if expected else
                    f"{arg}: {e['msg'][:1].lower()}{e['msg'][1:]}, got {sent}")
    return f"{tool}: " + "; ".join(said)


def _compact(schema: Any) -> Any:
    """A JSON schema without pydantic's titles, ``null`` defaults and ``anyOf`` null branches."""
    if isinstance(schema, list):
        return [_compact(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _compact(v) for k, v in schema.items() if k != "title" and not (k == "default" and v is None)}
    branches = out.get("anyOf")
    if isinstance(branches, list):
        kept = [b for b in branches if b != {"type": "null"}]
        if len(kept) == 1 and isinstance(kept[0], dict):
            del out["anyOf"]
            out = {**kept[0], **out}
    return out


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

    Each reply carries its text and the same facts as ``structuredContent`` (JSON); the tools declare no output
    schema, which an agent does not read (the text says everything) and which would triple the tool list.

    Example:
        >>> server = build_server(CodeService(lambda: retriever, freshness="off"))     # doctest: +SKIP
        >>> server.run()                                                               # doctest: +SKIP
    """
    from .. import __version__

    s = service.settings
    app = _Server(
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
        query: Annotated[str, Field(description="A question, identifiers, a line of code or an error message.")],
        max_tokens: Annotated[int | None, Field(
            description=f"Budget of the whole reply (default {s.max_tokens}, at most {s.hard_cap}).",
            json_schema_extra={"minimum": 1})] = None,
        k: Annotated[int | None, Field(description="Hits (default: as many as fit max_tokens)." if s.k is None
                                       else f"Hits (default {s.k}).",
                                       json_schema_extra={"minimum": 1, "maximum": s.max_k})] = None,
        path: Annotated[str | None, Field(description="Only this file, directory or glob ('src/**/*.ts').")] = None,
        language: Annotated[str | None, Field(description="Only this language (python, typescript, ...).")] = None,
        dense_fallback: Annotated[bool, Field(description="When no word of the query occurs in the index: the "
                                              "nearest code by meaning alone, instead of no hits.")] = False,
    ) -> CallToolResult:
        """Search the indexed code; use it first for any question about it. Returns the ranked hits (path, lines,
        symbol) and a confidence, then each hit's code with its class header or skeleton and the imports it uses,
        under '# path:start-end' markers, within max_tokens. Confidence under 0.6: rephrase with identifiers, or
        narrow with path or language. A known name: get_symbol."""
        return _guarded(service, lambda: service.search_code(query, max_tokens, k, path, language, dense_fallback))

    def get_symbol(
        name: Annotated[str, Field(description="'Class.method', a function or a class; a bare method name finds "
                                               "every Class.method.")],
        path: Annotated[str | None, Field(description="Only in this file.")] = None,
    ) -> CallToolResult:
        """The exact source of every definition with this name, from the index (no search). Cut at a line when it
        does not fit the server's budget; the reply names the get_lines call that continues it."""
        return _guarded(service, lambda: service.get_symbol(name, path))

    def get_lines(
        path: Annotated[str, Field(description="A file as search_code reports it.")],
        start: Annotated[int, Field(description="First line (1-based).", json_schema_extra={"minimum": 1})],
        end: Annotated[int | None, Field(description="Last line, inclusive (default: the end of the file).",
                                         json_schema_extra={"minimum": 1})] = None,
    ) -> CallToolResult:
        """Exact lines of an indexed file, from the index: around a hit, a whole file, or the rest of a cut
        reply. Cut at a line when it does not fit the server's budget; the reply says where to continue."""
        return _guarded(service, lambda: service.get_lines(path, start, end))

    def index_status() -> CallToolResult:
        """What the index holds and how fresh it is: files, last update, changes not indexed yet, a refresh
        running, the embedding and chunking settings, files that failed. When results look stale."""
        return _guarded(service, service.index_status)

    def reindex(
        paths: Annotated[list[str] | None, Field(description="Files or directories (default: the whole tree).")]
        = None,
    ) -> CallToolResult:
        """Index the files on disk now and report what changed. Rarely needed: the server follows edits itself;
        after a branch switch, or when index_status shows pending changes you need now."""
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
    # A filter that matches nothing is said in the tool's reply (the service asks the index), not on stderr.
    warnings.filterwarnings("ignore", category=FilterWarning)


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
