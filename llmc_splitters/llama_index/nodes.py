"""LlamaIndex ``TextNode``s for spans: their metadata in each view, their ids and their source link."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any, Optional

from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode

from .._faces import framework_metadata, framework_text
from ..chunking.inputs import escape_surrogates
from ..chunking.span import Span

__all__ = ["node_id", "related", "text_node"]

# Bookkeeping keys: useful for filters and citations, noise for an embedding model.
_EMBED_EXCLUDED = (
    "span_id", "parent_id", "source", "kind", "breadcrumb", "start_line", "end_line", "start_byte", "end_byte",
    "start_index", "end_index", "token_count",
)
_LLM_EXCLUDED = (
    "span_id", "parent_id", "source", "breadcrumb", "start_byte", "end_byte", "start_index", "end_index",
    "token_count",
)

# Node ids are uuid5(namespace, source id + span id): stable across runs, distinct across documents.
_NODE_NAMESPACE = uuid.UUID("0b6f3c55-2c4e-5d8a-9e1f-7a3b2c1d4e5f")


def node_id(source_id: str, span: Span) -> str:
    """The deterministic node id of ``span`` parsed from the node ``source_id``."""
    return str(uuid.uuid5(_NODE_NAMESPACE, f"{source_id}\x00{span.id}"))


def text_node(
    span: Span,
    node: BaseNode,
    metadata: Mapping[str, Any],
    source: RelatedNodeInfo,
    parent_node_id: Optional[str],
    in_document: bool,
    id_: str,
    include_metadata: bool,
) -> TextNode:
    """The node of ``span``, without its context header and overlap (see ``CodeNodeParser._fit``); with
    ``include_metadata`` it carries the document's metadata too."""
    span_meta = span.to_metadata()
    # Always present, "" for none: vector stores (Chroma) reject None values.
    span_meta.setdefault("symbol", "")
    span_meta.setdefault("breadcrumb", "")
    span_meta.pop("parent_id", None)
    if parent_node_id is not None:
        span_meta["parent_id"] = parent_node_id
    for key in ("cell_index", "cell_type"):
        if key in span.metadata:
            span_meta[key] = span.metadata[key]
    if "source" in metadata:
        span_meta.pop("source", None)
    meta = {**metadata, **span_meta} if include_metadata else span_meta
    empty = [key for key in ("symbol",) if not span_meta.get(key)]  # no "symbol: " line for unnamed code
    excluded_embed = list(dict.fromkeys([*node.excluded_embed_metadata_keys, *_EMBED_EXCLUDED, *empty]))
    excluded_llm = list(dict.fromkeys([*node.excluded_llm_metadata_keys, *_LLM_EXCLUDED, *empty]))
    # Formatting settings follow the input node, as in LlamaIndex's build_nodes_from_splits.
    formatting = {
        key: getattr(node, key)
        for key in ("metadata_separator", "metadata_template", "text_template")
        if isinstance(getattr(node, key, None), str)
    }
    text, restore = framework_text(span.text)
    meta.update(restore)
    return TextNode(
        id_=id_,
        text=text,
        metadata=framework_metadata(meta),
        start_char_idx=span.start_char if in_document else None,
        end_char_idx=span.end_char if in_document else None,
        excluded_embed_metadata_keys=excluded_embed,
        excluded_llm_metadata_keys=excluded_llm,
        relationships={NodeRelationship.SOURCE: source},
        **formatting,
    )


def related(node: BaseNode) -> RelatedNodeInfo:
    """``node.as_related_node_info()``, also for a document whose text holds lone surrogates: LlamaIndex's own
    hash of such text raises ``UnicodeEncodeError``, so its hash is taken of the escaped text instead."""
    text, record = escape_surrogates(node.get_content(metadata_mode=MetadataMode.NONE))
    clean = framework_metadata(dict(node.metadata or {}))
    if not record and clean == dict(node.metadata or {}):
        return node.as_related_node_info()
    digest = hashlib.sha256((text + str(clean)).encode("utf-8")).hexdigest()
    return RelatedNodeInfo(node_id=node.node_id, node_type=node.get_type(), metadata=clean, hash=digest)
