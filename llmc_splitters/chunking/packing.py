"""Packing: the units of a split file grouped into leaves, each within the token budget.

A definition, a standalone block and a fallback piece are each a leaf of their own. A run of adjacent glue units
of one scope (statements, imports, comments between definitions; the fragments of a split body) is packed greedily
up to the budget:

* Comments and docstrings (*neutral* units) take the category of the statement after them, and imports are never
  packed with other statements.
* Near the budget the group's exact count decides; a group that must end prefers its last blank line (when that
  keeps at least half of it), else a line start, else leaves the comments right above the next unit to that unit.
  In prose (``paragraph_groups``), a blank line ends a group that holds a quarter of the budget, and a Bats test
  (``@test "name" {``) begins one.
* A group that does not fit after all (counts are not exactly additive) sheds units from its end into the next.
* A small group (under a budget/8 tokens: a closing brace, a last statement) joins a neighbour of its category when
  the join fits, and a leaf of nothing but whitespace joins the leaf before it.
* A fragment that cannot stand alone (a leaf of at most 10 tokens, not a definition nor imports) joins its neighbour in
  the same scope across what packing keeps apart (a definition, a change of category, a split string) when the
  join fits: a header (it opens a block, or begins a split definition: ``class Typer:``) the leaf after it,
  anything else (a closing ``}``, ``main()``, the closing quotes of a split docstring) the leaf before it, else
  the other. Imports stay a leaf of their own, and a definition takes only what trails it and the header of its
  own split scope; a leaf so joined to one definition is labelled as that definition.

Pure functions over the units, the file's bytes and its :class:`~llmc_splitters.chunking.counting.RangeCounter`.
"""

from __future__ import annotations

from .counting import RangeCounter
from .units import Leaf, Unit

# A packed group under budget / this many tokens joins a neighbouring group of its run when the join fits.
_SMALL_LEAF_DIV = 8
# A leaf of at most this many tokens (budget/8 under a small budget) that is not a definition nor imports is a
# fragment: it joins a neighbour even across a definition or a change of category.
_FRAGMENT_TOKENS = 10
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")


def merge(units: list[Unit], data: bytes, counter: RangeCounter) -> list[Leaf]:
    """Group units into leaves: definitions alone, glue runs of one scope packed up to the budget."""
    leaves: list[Leaf] = []
    i = 0
    n = len(units)
    while i < n:
        u = units[i]
        if u.role != "glue":
            tokens = u.tokens if u.tokens >= 0 else counter.count(u.start, u.end)
            leaves.append(Leaf(u.start, u.end, u.scope, "", None, tokens, [u], {}))
            i += 1
            continue
        j = i
        while j < n and units[j].role == "glue" and units[j].scope is u.scope:
            j += 1
        for group in _pack(units[i:j], data, counter):
            start, end = group[0].start, group[-1].end
            tokens = counter.count(start, end)
            leaves.append(Leaf(start, end, u.scope, "", None, tokens, group, {}))
        i = j
    return _join_fragments(_absorb_blank(leaves, data, counter), data, counter)


def _absorb_blank(leaves: list[Leaf], data: bytes, counter: RangeCounter) -> list[Leaf]:
    """A leaf of nothing but whitespace joins the leaf before it (same scope, if it still fits)."""
    out: list[Leaf] = []
    for leaf in leaves:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.scope is leaf.scope
            and _blank(data, leaf.start, leaf.end)
            and counter.count(prev.start, leaf.end) <= counter.budget
        ):
            prev.end = leaf.end
            prev.tokens = counter.count(prev.start, leaf.end)
            prev.units = [*prev.units, *leaf.units]
            continue
        out.append(leaf)
    return out


def _blank(data: bytes, start: int, end: int) -> bool:
    """Whether ``data[start:end]`` is only whitespace; the first byte decides for almost every range, without copying
    and stripping the range."""
    return start == end or data[start] in _WHITESPACE and not data[start:end].strip()


def _is_fragment(leaf: Leaf, limit: int) -> bool:
    return leaf.tokens <= limit and all(u.role in ("glue", "piece") for u in leaf.units) and not all(
        u.category in ("import", "neutral") for u in leaf.units)


def _takes(neighbour: Leaf, fragment: Leaf, after: bool) -> bool:
    """Whether ``neighbour`` (after the fragment, or before it) may take ``fragment``: imports stay their own
    leaf, and a definition takes what trails it (a closing brace, a last statement) and, after it, only the header
    of the split definition it begins."""
    if any(u.category == "import" for u in neighbour.units):
        return False
    if not any(u.role == "def" for u in neighbour.units):
        return True
    return not after or fragment.scope.info is not None and fragment.start == fragment.scope.start


def _opens(leaf: Leaf, data: bytes) -> bool:
    """The leaf is a header: it begins a split definition, or its code ends by opening a block."""
    if leaf.scope.info is not None and leaf.start == leaf.scope.start:
        return True
    return data[leaf.start : leaf.end].rstrip()[-1:] in (b":", b"{", b"(", b"[")


def _join_fragments(leaves: list[Leaf], data: bytes, counter: RangeCounter) -> list[Leaf]:
    """Join each fragment to a neighbour of its scope (see the module docstring); leaves stay contiguous."""
    limit = max(1, min(_FRAGMENT_TOKENS, counter.budget // _SMALL_LEAF_DIV))
    out = list(leaves)
    k = 0
    while k < len(out):
        leaf = out[k]
        if not _is_fragment(leaf, limit):
            k += 1
            continue
        before = k - 1 if k > 0 and out[k - 1].scope is leaf.scope else None
        after = k + 1 if k + 1 < len(out) and out[k + 1].scope is leaf.scope else None
        order = (after, before) if _opens(leaf, data) else (before, after)
        for m in order:
            if m is None or not _takes(out[m], leaf, after=m > k):
                continue
            a, b = (out[m], leaf) if m < k else (leaf, out[m])
            tokens = counter.count(a.start, b.end)
            if tokens > counter.budget:
                continue
            out[min(m, k)] = Leaf(a.start, b.end, a.scope, "", None, tokens, [*a.units, *b.units], {})
            del out[max(m, k)]
            k = min(m, k) + 1  # a joined leaf is not joined again: fragments do not snowball
            break
        else:
            k += 1
    return out


def _pack(run: list[Unit], data: bytes, counter: RangeCounter) -> list[list[Unit]]:
    if len(run) == 1:
        return [run]  # what the packing below makes of one unit, without its set-up (most runs between definitions)
    # Neutral units (comments, docstrings) take the category of the next statement.
    cats: list[str] = [u.category for u in run]
    nxt = "other"
    for k in range(len(run) - 1, -1, -1):
        if cats[k] == "neutral":
            cats[k] = nxt
        else:
            nxt = cats[k]
    paragraphs = run[0].scope.spec.paragraph_groups
    comments = run[0].scope.spec.comment_types
    groups: list[list[Unit]] = []
    hard: list[bool] = []  # hard[g]: group g starts at a change of category (never joined to the one before)
    group: list[Unit] = []
    group_hard = False
    total = 0
    budget = counter.budget
    for k, u in enumerate(run):
        t = counter.estimate(u.start, u.end)
        cat_break = bool(group) and (cats[k] != cats[k - 1])
        breaks = cat_break
        if group and not breaks and paragraphs and (_blank_before(data, u.start) and total >= budget // 4
                                                    or _bats_test(u, data)):
            breaks = True  # a Bats test (`@test "name" {`) begins a leaf of its own
        if group and not breaks and budget < total + t <= budget + budget // 4:
            # Near the budget the estimate decides where a leaf ends: count exactly (a wrong "over" leaves a
            # small leaf behind, e.g. a function's closing brace).
            joined = counter.count(group[0].start, u.end)
            if joined <= budget:
                t = joined - total
        if group and not breaks and total + t > budget:
            # Prefer to end the group at its last blank line (if that keeps at least half of it), else at a
            # line start rather than inside a line; only when what is carried over then fits with ``u``
            # (a cut that leaves the carried units alone only adds a small leaf).
            cut = _last_blank(group, total, data, counter)
            if cut is None and not _line_start(data, u.start):
                cut = next((m for m in range(len(group) - 1, 0, -1) if _line_start(data, group[m].start)), None)
            if cut is None:
                # Comments right above ``u`` go with it.
                m = len(group)
                while m > 1 and group[m - 1].node_type in comments:
                    m -= 1
                cut = m if m < len(group) else None
            if cut is not None:
                rest = sum(counter.estimate(x.start, x.end) for x in group[cut:])
                if rest + t <= budget:
                    groups.append(group[:cut])
                    hard.append(group_hard)
                    group, group_hard, total = group[cut:], False, rest
            if group and total + t > budget:
                breaks = True
        if breaks:
            groups.append(group)
            hard.append(group_hard)
            group, group_hard, total = [], cat_break, 0
        group.append(u)
        total += t
    if group:
        groups.append(group)
        hard.append(group_hard)
    # Counts are not exactly additive across joins: make sure every packed group really fits. What a group
    # sheds joins the next group when that fits (same category), so that it does not become a leaf of its own.
    out: list[list[Unit]] = []
    out_hard: list[bool] = []
    carry: list[Unit] = []
    for g, h in zip(groups, hard):
        if carry:
            if not h and counter.count(carry[0].start, g[-1].end) <= budget:
                g = carry + g
            else:
                for x in _pack_exact(carry, counter):
                    out.append(x)
                    out_hard.append(False)
            carry = []
        if len(g) > 1 and counter.count(g[0].start, g[-1].end) > budget:
            head, carry = _shed(g, counter)
            out.append(head)
        else:
            out.append(g)
        out_hard.append(h)
    for x in _pack_exact(carry, counter):
        out.append(x)
        out_hard.append(False)
    return _absorb_small(out, out_hard, counter)


def _absorb_small(groups: list[list[Unit]], hard: list[bool], counter: RangeCounter) -> list[list[Unit]]:
    """A small group (a closing brace, the last statement after a blank line) joins the group before it, or
    else the one after it, when they are of the same category and the join fits the budget."""
    small = max(1, counter.budget // _SMALL_LEAF_DIV)
    k = 0
    while k < len(groups) and len(groups) > 1:
        g = groups[k]
        if counter.count(g[0].start, g[-1].end) >= small:
            k += 1
            continue
        if k > 0 and not hard[k] and counter.count(groups[k - 1][0].start, g[-1].end) <= counter.budget:
            groups[k - 1] = groups[k - 1] + g
            del groups[k], hard[k]
            continue
        if (
            k + 1 < len(groups)
            and not hard[k + 1]
            and counter.count(g[0].start, groups[k + 1][-1].end) <= counter.budget
        ):
            groups[k + 1] = g + groups[k + 1]
            hard[k + 1] = hard[k]
            del groups[k], hard[k]
            continue
        k += 1
    return groups


def _shed(group: list[Unit], counter: RangeCounter) -> tuple[list[Unit], list[Unit]]:
    """Shrink ``group`` from the right until it fits: (what fits, what fell off)."""
    head = list(group)
    tail: list[Unit] = []
    while len(head) > 1 and counter.count(head[0].start, head[-1].end) > counter.budget:
        tail.insert(0, head.pop())
    return head, tail


def _pack_exact(units: list[Unit], counter: RangeCounter) -> list[list[Unit]]:
    groups: list[list[Unit]] = []
    group: list[Unit] = []
    for u in units:
        if group and counter.count(group[0].start, u.end) > counter.budget:
            groups.append(group)
            group = []
        group.append(u)
    if group:
        groups.append(group)
    return groups


def _bats_test(u: Unit, data: bytes) -> bool:
    return u.node is not None and u.node.type == "command" and data[u.start : u.end].lstrip().startswith(b"@test")


def _line_start(data: bytes, pos: int) -> bool:
    return pos == 0 or data[pos - 1 : pos] == b"\n"


def _blank_before(data: bytes, pos: int) -> bool:
    # A line break, blank space, a line break, then only indentation up to pos (within 256 bytes).
    head = data[max(0, pos - 256) : pos].rstrip(b" \t\f\v")
    return head.endswith(b"\n") and head[:-1].rstrip(b" \t\r\f\v").endswith(b"\n")


def _last_blank(group: list[Unit], total: int, data: bytes, counter: RangeCounter) -> int | None:
    acc = total
    for k in range(len(group) - 1, 0, -1):
        acc -= counter.estimate(group[k].start, group[k].end)
        if acc < counter.budget // 2:
            return None
        if _blank_before(data, group[k].start):
            return k
    return None
