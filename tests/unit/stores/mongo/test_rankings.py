"""The pure parts of the MongoDB batch-view layout: collection names and the day rankings' documents."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stores.mongo import codec as store


def test_collection_names_are_per_view_and_generation() -> None:
    assert store.collection_name("page", 12) == "bv_page_g12"
    assert store.parse_collection_name("bv_page_g12") == ("page", 12)
    assert store.parse_collection_name("generations") is None


def test_a_ranking_sorts_by_page_views_then_key_and_a_day_without_keys_still_has_one() -> None:
    [doc] = store.rank_documents("2024-06-01", [("/b", 3), ("/a", 3), ("/c", 9)])
    assert doc["_id"] == "2024-06-01|#rank" and (doc["chunk"], doc["chunks"]) == (0, 1)
    assert (doc["keys"], doc["pv"]) == (["/c", "/a", "/b"], [9, 3, 3])
    assert store.is_rank_document(doc) and not store.is_rank_document({"key": "/a"})
    [empty] = store.rank_documents("2024-06-02", [])
    assert (empty["chunks"], empty["keys"]) == (1, [])


@given(st.dictionaries(st.text(min_size=1, max_size=4), st.integers(0, 50), max_size=40))
def test_a_ranking_in_chunks_reads_back_whole_and_a_missing_chunk_is_noticed(counts: dict[str, int]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(store, "RANK_CHUNK", 7)
        chunks = store.rank_documents("d", counts.items())
    assert [c["_id"] for c in chunks] == [store.rank_document_id("d", i) for i in range(len(chunks))]
    assert all(c["chunks"] == len(chunks) for c in chunks)
    ranked = store.ranking_from_chunks(list(chunks))
    assert ranked == sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(chunks) > 1:
        assert store.ranking_from_chunks([chunks[0], None, *chunks[2:]]) is None
