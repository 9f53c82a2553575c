"""Ranking variants named on a benchmark's command line, shared by the retrieval benchmarks.

    --ablate noise,tiny             those rules off together (``Ranking().without``)
    --rank decay=0.5 --rank path_min=0.2   any field of :class:`~llmc_splitters.retrieval.Ranking` (JSON values)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any


def ranking_from(ablate: str, settings: Sequence[str]) -> Any:
    """The library's :class:`~llmc_splitters.retrieval.Ranking` with the ``ablate`` rules off and ``settings``
    (``name=value``) applied; ``None`` when neither is given (the library's default)."""
    if not ablate and not settings:
        return None
    from llmc_splitters.retrieval import Ranking

    return replace(Ranking().without(*[a for a in ablate.split(",") if a]), **settings_from(settings))


def settings_from(settings: Sequence[str]) -> dict[str, Any]:
    """``name=value`` settings as the fields they set (a value is JSON when it parses as JSON, else the string)."""
    values = {}
    for s in settings:
        name, _, value = s.partition("=")
        try:
            values[name] = json.loads(value)
        except json.JSONDecodeError:
            values[name] = value
    return values
