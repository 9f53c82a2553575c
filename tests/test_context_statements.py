"""What a reply shows around a TypeScript method: its class closed, its statements whole (issue 37, items 6 and 9).

* Item 9: a method's class was shown as one unclosed line (``export class Reply<E = unknown> {``) when the class's
  skeleton did not fit. Now the skeleton is cut down to the members the method reaches (``this.retryOptions``,
  ``this.calculateDelay()``) between the header and the closing brace, and it parses.
* Item 6: the imports a hit uses were shown by their lines (``import Options, {`` and ``\ttype RetryOptions,``
  without ``} from './options.js';``), a module-level binding by its first line, and each line under its own marker.
  Now a short statement is shown whole, a long one by its head, the lines naming what the hit uses and its closing
  line (an ``excerpt``), and used statements that only other short ones separate share one marker.

The file is in the shape of a real HTTP client's response class (ky, ofetch); the property tests generate imports
and member sets and parse what is shown with the TypeScript and Python grammars.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmc_splitters.chunking.analysis import skeleton_entries, skeleton_for
from llmc_splitters.retrieval.context.lookup import binding_lines

pytest.importorskip("tantivy")
tlp = pytest.importorskip("tree_sitter_language_pack")

from llmc_splitters.retrieval import CodeRetriever  # noqa: E402

NAMES = ["beforeRequest", "beforeRetry", "afterResponse", "beforeError", "HTTPError", "TimeoutError",
         "mergeHeaders", "normalizeRequestMethod", "normalizeRetryOptions", "delay", "isObject", "deepMerge"]

REPLY_TS = """\
import Options, {
	type Hooks,
	type RetryOptions,
} from './options.js';
import {
""" + "".join(f"\t{n},\n" for n in NAMES) + """\
} from './utils/index.js';
import type {Input} from './types.js';

type InternalsType = {
	retryCount: number;
	startedAt: number;
};

const defaultInternals: InternalsType = {
	retryCount: 0,
	startedAt: 0,
};

export const maxSafeTimeout = 2_147_483_647;

/**
 * A response wrapper that knows how to retry the request that produced it.
 */
export class Reply<E = unknown> {
	readonly request: Request;
	protected response?: Response;
	protected internals: InternalsType = {...defaultInternals};
	private readonly retryOptions: Required<RetryOptions>;
	private readonly hooks: Hooks;

	constructor(input: Input, options: Options) {
		this.request = new Request(input);
		this.retryOptions = normalizeRetryOptions(options.retry);
		this.hooks = options.hooks ?? {};
	}

	/** Whether another attempt is allowed for this error. */
	shouldRetry(error: unknown): boolean {
		if (this.internals.retryCount >= this.retryOptions.limit) {
			return false;
		}

		if (error instanceof HTTPError) {
			return this.retryOptions.statusCodes.includes(error.response.status);
		}

		return !(error instanceof TimeoutError);
	}

	/** The delay before the next attempt, in milliseconds. */
	calculateDelay(): number {
		const retryDelay = 0.3 * (2 ** (this.internals.retryCount - 1)) * 1000;
		return Math.min(this.retryOptions.backoffLimit, retryDelay);
	}

	async json<T = E>(): Promise<T> {
		const response = await this.fetch();
		if (response.status === 204) {
			return '' as T;
		}

		return (await response.json()) as T;
	}

	async text(): Promise<string> {
		const response = await this.fetch();
		return response.text();
	}

	/**
	 * Send the request, retrying on failure as the retry options allow.
	 */
	async retry(fn: () => Promise<Response>): Promise<Response> {
		try {
			return await fn();
		} catch (error) {
			if (!this.shouldRetry(error)) {
				throw error;
			}

			this.internals.retryCount++;
			const ms = this.calculateDelay();
			if (ms > maxSafeTimeout) {
				throw new RangeError(`The retry delay ${ms} ms is over ${maxSafeTimeout} ms`);
			}

			await delay(ms);
			for (const hook of this.hooks.beforeRequest ?? []) {
				hook(this.request);
			}

			return this.retry(fn);
		}
	}

	protected async fetch(): Promise<Response> {
		this.internals.startedAt = Date.now();
		this.response = await this.retry(async () => globalThis.fetch(this.request.clone()));
		for (const hook of this.hooks.afterResponse ?? []) {
			this.response = hook(this.request, this.response) ?? this.response;
		}

		return this.response;
	}
}
"""


def _errors(text: str, grammar: str) -> list[str]:
    root = tlp.get_parser(grammar).parse(text.encode()).root_node
    out, stack = [], [root]
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            out.append(f"{n.type}@{n.start_point[0] + 1}")
        stack.extend(n.children)
    return out


def _line(needle: str) -> int:
    return REPLY_TS[: REPLY_TS.index(needle)].count("\n") + 1


@pytest.fixture(scope="module")
def retriever():
    r = CodeRetriever(max_tokens=96, k=1)
    r.index_texts({"src/reply.ts": REPLY_TS})
    return r


def _reply(retriever, budget):
    res = retriever.retrieve("the delay before the next attempt in milliseconds", max_context_tokens=budget)
    assert res.hits[0].span.start_line == _line("/** The delay before")
    return res


def test_a_method_whose_class_skeleton_does_not_fit_gets_its_class_closed_with_the_members_it_reaches(retriever):
    res = _reply(retriever, 200)
    assert res.token_count <= 200
    [skel] = [p for p in res.pieces if p.kind == "skeleton"]
    assert (skel.start_line, skel.end_line) == (_line("/**\n * A response wrapper"), REPLY_TS.count("\n"))
    # calculateDelay reaches this.internals and this.retryOptions: their declarations, between header and brace.
    assert skel.text == ("export class Reply<E = unknown> {\n"
                         "\tprotected internals: InternalsType = {...defaultInternals};\n"
                         "\tprivate readonly retryOptions: Required<RetryOptions>;\n"
                         "}\n")
    assert not _errors(skel.text, "typescript")


def test_with_room_the_class_skeleton_is_whole(retriever):
    """(What did not fit in 200 tokens above.)"""
    res = _reply(retriever, 500)
    [skel] = [p for p in res.pieces if p.kind == "skeleton"]
    for member in ("shouldRetry(error: unknown): boolean { /* … */ }", "protected async fetch(): Promise<Response>"):
        assert member in skel.text
    assert not _errors(skel.text, "typescript")


def test_the_statements_a_method_uses_are_shown_whole_under_one_marker(retriever):
    """``constructor`` uses Options, RetryOptions (through the field types it sets), normalizeRetryOptions and
    Input: the three-line import whole with its ``from``, and the long utils import as an excerpt."""
    res = retriever.retrieve("constructor normalizeRetryOptions options hooks", max_context_tokens=600)
    assert res.hits[0].span.start_line == _line("\tconstructor(input")
    ctx = res.context
    assert "import Options, {\n\ttype Hooks,\n\ttype RetryOptions,\n} from './options.js';\n" in ctx
    excerpt = "import {\n\tnormalizeRetryOptions,\n} from './utils/index.js';\n"
    first = _line("import {\n")
    assert f"# src/reply.ts:{first}-{first + len(NAMES) + 1} (excerpt)\n{excerpt}" in ctx
    assert "import type {Input} from './types.js';\n" in ctx
    imports = [p for p in res.pieces if p.end_line < _line("type InternalsType")]
    assert len(imports) == 3  # options (1-4), the utils excerpt, the types import: not one marker per line
    shown = "".join(p.text for p in imports)
    assert not _errors(shown, "typescript")


def test_a_module_level_binding_is_shown_whole(retriever):
    res = retriever.retrieve("readonly request protected response internals retryOptions hooks fields",
                             max_context_tokens=600)
    assert res.hits[0].span.start_line <= _line("\treadonly request: Request;") <= res.hits[0].span.end_line
    assert ("const defaultInternals: InternalsType = {\n\tretryCount: 0,\n\tstartedAt: 0,\n};\n" in res.context)
    assert "type InternalsType = {\n\tretryCount: number;\n\tstartedAt: number;\n};\n" in res.context
    # The two statements and the blank line between them are one piece, under one marker.
    start = _line("type InternalsType")
    assert f"# src/reply.ts:{start}-{start + 8}\ntype InternalsType" in res.context


# ------------------------------------------------------------------------------------------------ properties

_IDENTS = st.from_regex(r"[a-z][A-Za-z]{2,9}", fullmatch=True)


@settings(max_examples=80, deadline=None)
@given(names=st.lists(_IDENTS, min_size=1, max_size=20, unique=True), data=st.data(),
       language=st.sampled_from(["typescript", "python"]))
def test_every_import_shown_parses(names, data, language):
    """Whatever names of an import a hit uses, what is shown of it parses: whole, or head + those lines + close."""
    if language == "typescript":
        text = "import {\n" + "".join(f"\t{n},\n" for n in names) + "} from './mod.js';\n"
    else:
        text = "from mod import (\n" + "".join(f"    {n},\n" for n in names) + ")\n"
    used = set(data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names))))
    b = {"start": 0, "end": len(text.encode()), "start_line": 1, "end_line": text.count("\n"), "text": text,
         "names": names, "kind": "import"}
    [snip] = binding_lines("m", [b], [0], used)
    shown = snip.text if snip.lines is None else "".join(
        ln for k, ln in enumerate(snip.text.splitlines(keepends=True)) if k in snip.lines)
    assert not _errors(shown, language)
    for n in used:
        assert re.search(rf"\b{n}\b", shown)
    assert (snip.lines is None) == (len(names) + 2 <= 8)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_cut_down_skeleton_parses_whatever_the_method_reaches(data):
    from llmc_splitters import ASTChunker

    tree = ASTChunker(max_tokens=96, analyze=True).chunk_tree(REPLY_TS, path="src/reply.ts")
    [cls] = [s for s in tree.spans if s.kind == "class" and "skeleton" in s.metadata]
    skeleton = cls.metadata["skeleton"]
    members = [e.signature[0] for e in skeleton_entries(skeleton) if e.role == "member" and e.signature]
    names = [re.findall(r"[A-Za-z_$][\w$]*(?=\s*[(:<?=;])", m)[0] for m in members]
    reached = data.draw(st.lists(st.sampled_from([*names, "notAMember"]), max_size=6))
    code = "\n".join(f"this.{n}();" for n in reached)  # (a parameter property's name is the constructor's)
    got = skeleton_for(skeleton, code)
    assert got is not None and not _errors(got, "typescript")
    for n in set(reached) - {"notAMember"}:
        assert re.search(rf"\b{re.escape(n)}\b", got)
    assert ("constructor(" in got) == ("notAMember" in reached or "constructor" in reached)
