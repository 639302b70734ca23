"""The meaning channel: a memory asked in other words is found, said so, and only real matches
come back; vectors follow every path a memory takes (a write, another kernel's write, a bulk
write, the saved index, another model)."""

from __future__ import annotations

import numpy as np
import pytest

from slm_magic import Memory
from slm_magic.index.meaning import PACKAGED, StaticModel, WordPiece, load_model, memory_text

FINDINGS = [
    "The image classifier confuses huskies with wolves because of snow in the background.",
    "customer_id is not unique in the CRM export: 312 duplicates come from merged accounts, keep the newest row.",
    "Timestamps in the events table are in UTC, but the dashboard shows Europe/Berlin local time.",
    "The language detector labels short Dutch reviews as German about a third of the time.",
    "Store IDs 900-999 are test stores used by QA and must be excluded from revenue reports.",
]
# (from benchmarks/data/paraphrase.json: it shares no content word with FINDINGS[0])
OTHER_WORDS = "the photo model mistakes dogs for wild animals, blame the scenery"


def test_the_shipped_model_loads_from_the_package_and_embeds_text_as_unit_vectors():
    model = load_model()
    assert PACKAGED.is_file() and model is load_model("default")  # loaded once per process
    vecs = model.encode([FINDINGS[0], "", "   "])
    assert vecs.dtype == np.float32 and vecs.shape == (3, model.dims)
    assert np.linalg.norm(vecs[0]) == pytest.approx(1.0, abs=1e-5) and not vecs[1:].any()
    # one by one and in a batch: the same vector
    assert np.allclose(model.encode([FINDINGS[1]])[0], model.encode(FINDINGS)[1], atol=1e-6)
    assert model.name.startswith("slm-static-minilm-256@")


def test_wordpiece_cuts_words_as_bert_uncased_does():
    wp = WordPiece(["[PAD]", "[UNK]", "un", "##aff", "##able", "cafe", ",", "the"])
    assert wp.words("Unaffable, the CAFÉ") == ["unaffable", ",", "the", "cafe"]
    assert wp.ids("Unaffable, the CAFÉ zzz") == [2, 3, 4, 6, 7, 5, 1]


def test_a_finding_asked_in_other_words_is_found_and_says_why(mem):
    for f in FINDINGS:
        mem.remember(f)
    res = mem.recall(OTHER_WORDS)
    assert res.retrieval_mode == "full_bm25_tfidf_meaning" and not res.degraded_mode
    top = res.memories[0]
    assert top.content == FINDINGS[0]
    assert top.similar and top.reason == "similar meaning" and top.matched == {}
    assert top.bm25 == 0 and 0 < top.score.meaning <= 1 and 0 < top.relevance < 1
    assert top.relevance == pytest.approx(mem.config.meaning_weight * top.score.meaning)


def test_only_real_matches_come_back(mem):
    for f in FINDINGS:
        mem.remember(f)
    assert mem.recall("a recipe for sourdough bread with a long cold proof").memories == []
    assert mem.recall("zygomorphic").memories == []


def test_without_the_meaning_channel_other_words_find_nothing(clock):
    with Memory(":memory:", clock=clock, semantic=False) as words_only:
        for f in FINDINGS:
            words_only.remember(f)
        res = words_only.recall(OTHER_WORDS)
        assert FINDINGS[0] not in [m.content for m in res.memories]
        assert res.retrieval_mode == "full_bm25_tfidf" and not res.degraded_mode
        assert "semantic=False" in words_only.status().meaning


def test_a_word_match_is_never_below_a_less_relevant_meaning_only_match(mem):
    for f in FINDINGS:
        mem.remember(f)
    res = mem.recall("the photo model mistakes dogs for wild animals; which shops are excluded")
    words = [m for m in res.memories if m.bm25 > 0]
    for i, m in enumerate(res.memories):
        if m.bm25 == 0:  # meaning alone: no more relevant, higher-scoring word match below it
            assert all(w.relevance <= m.relevance and w.score.value < m.score.value
                       for w in words if res.memories.index(w) > i)


def test_vectors_follow_bulk_writes_other_kernels_and_the_saved_index(tmp_path):
    db = str(tmp_path / "m.duckdb")
    first = Memory(db)
    first.remember_many([{"content": f"note {i} about the weekly sales of region {i % 7}"} for i in range(6000)])
    first.detach()
    second = Memory(db)  # another kernel: its index (and vectors) from the file
    second.remember(FINDINGS[0])
    second.detach()
    found = first.recall(OTHER_WORDS)  # caught up with the other kernel's write, its vector too
    assert found.memories and found.memories[0].content == FINDINGS[0] and found.memories[0].similar
    assert "vectors for 6,001 of 6,001" in first.status().meaning
    first.save_index()
    first.close()
    second.close()
    third = Memory(db)  # maps the saved index, vectors included
    assert third.replica.source == "saved index"
    assert third.recall(OTHER_WORDS).memories[0].content == FINDINGS[0]
    third.close()


def test_another_model_re_embeds_and_vectors_of_two_models_are_never_compared(tmp_path):
    db = str(tmp_path / "m.duckdb")
    with Memory(db) as m:
        m.remember_many([{"content": f"note {i} on the weekly sales of region {i % 7}"} for i in range(5999)])
        m.remember(FINDINGS[0])
        m.save_index()
    # another table: the shipped one, scaled (same cosines, another file: another model name)
    with np.load(PACKAGED) as z:
        parts = {k: z[k] for k in z.files}
    parts["scale"] = parts["scale"] * 2
    other = tmp_path / "other.npz"
    np.savez(other, **parts)
    with Memory(db, embedding_model=str(other)) as m:
        assert m.meaning.name != load_model().name
        assert m.index.vectors.model == m.meaning.name  # the saved vectors were not taken as its own
        assert "vectors for 6,000 of 6,000" in m.status().meaning
        assert m.recall(OTHER_WORDS).memories[0].content == FINDINGS[0]


def test_a_model_that_does_not_load_degrades_honestly(tmp_path, clock):
    with Memory(":memory:", clock=clock, embedding_model=str(tmp_path / "missing.npz")) as m:
        m.remember(FINDINGS[0])
        res = m.recall("huskies")
        assert res.degraded_mode and "did not load" in res.degraded_reason
        assert res.retrieval_mode == "full_bm25_tfidf" and res.memories[0].content == FINDINGS[0]
        assert "not running" in m.status().meaning
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a table")
    with Memory(":memory:", clock=clock, embedding_model=str(bad)) as m:
        assert m.recall("anything").degraded_mode


def test_memory_text_is_title_content_and_tags():
    assert memory_text("body", "Title", ["a", "b"]) == "Title\nbody\na b"
    assert memory_text("body", None, ()) == "body"


def test_a_static_table_of_the_users_own(tmp_path):
    vocab = np.array(["[PAD]", "[UNK]", "price", "cost"])
    table = np.array([[0, 0], [0, 0], [100, 0], [90, 40]], dtype=np.int8)
    np.savez(tmp_path / "tiny.npz", vocab=vocab, table=table, scale=np.ones(4, np.float32),
             meta=np.array('{"name": "tiny"}'))
    model = StaticModel.from_file(tmp_path / "tiny.npz")
    v = model.encode(["price", "cost", "neither"])
    assert model.name.startswith("tiny@") and model.dims == 2
    assert v[0] @ v[1] == pytest.approx(90 / np.hypot(90, 40)) and not v[2].any()


def test_an_identifier_a_memory_holds_brings_nothing_by_meaning(mem):
    exact = mem.remember("store_master has one row per store and opening date")
    mem.remember("the store in Leeds closes on Sundays")
    mem.remember("the master branch was tagged v2")
    assert [m.fact_id for m in mem.recall("store_master")] == [exact.fact_id]


def test_a_stray_common_word_is_not_a_match_but_a_real_one_is(mem):
    for f in FINDINGS:
        mem.remember(f)
    # "dashboard" is in FINDINGS[2], which is about time zones, not about the question
    res = mem.recall("the photo model mistakes dogs for wild animals on the dashboard")
    assert [m.content for m in res.memories] == [FINDINGS[0]]
    assert [m.content for m in mem.recall("dashboard")] == [FINDINGS[2]]  # asked alone, it is the match


def test_the_age_gate_reads_the_fused_relevance(mem, clock):
    from datetime import datetime

    clock.now = datetime(2026, 1, 1)
    old = mem.remember(FINDINGS[0])
    clock.now = datetime(2026, 6, 1)
    fresh = mem.remember(FINDINGS[3])
    init = mem.session_init(query=OTHER_WORDS, max_age_days=30)
    by_meaning = {m.fact_id: m for m in mem.recall(OTHER_WORDS).memories}
    assert by_meaning[old.fact_id].relevance < 0.70  # found by meaning alone: under the gate's 0.70
    assert old.fact_id not in {m.fact_id for m in init.memories}  # older than 30 days: held back
    assert fresh.fact_id not in by_meaning


def test_a_table_is_loaded_once_whatever_names_it():
    model = load_model()
    assert load_model(str(PACKAGED)) is model and load_model(model.path) is model


def test_a_question_of_words_the_model_never_saw_brings_nothing_by_meaning(tmp_path, monkeypatch):
    from test_memory import recall_from_sql

    model = load_model()
    assert not model.knows(["nipyxo", "kenuteze"]) and model.knows(["nipyxo", "dogs"])
    with Memory(str(tmp_path / "m.duckdb")) as mem:
        for f in FINDINGS:
            mem.remember(f)
        look_alike = mem.remember("nipyxa kenutezo sugamo lubetyka")  # (the same pieces, no word in common)
        made_up = "nipyxo kenuteze sugamy lubetyko"
        for res in (mem.recall(made_up), recall_from_sql(mem, made_up)):
            assert res.memories == []  # (a sum of word pieces means nothing: no look-alike by chance)
        assert mem.recall(OTHER_WORDS + " nipyxo").memories[0].content == FINDINGS[0]  # (one known word is enough)
        # what the rule keeps out: the look-alike stands out by its pieces' cosine alone
        monkeypatch.setattr(StaticModel, "knows", lambda self, words: True)
        assert [m.fact_id for m in mem.recall(made_up)] == [look_alike.fact_id]


def test_word_matches_beyond_the_pool_are_searched_by_their_own_vectors(mem):
    """In a store searched by cells, the word matches the meaning pool left out are read
    exactly (whichever cell holds them): each one whose cosine reaches the cutoff joins the
    cells' nearest once, with its own cosine, and none that does not."""
    from slm_magic.core import text
    from slm_magic.ranking.meaning import _with_word_matches

    ids = [mem.remember(f"{f} (about the store)").fact_id for f in FINDINGS]
    index = mem.index
    terms, qtf, qlen, *_ = mem.retrieval.analyse("the store", mem.now(), "auto")
    cs = index.channel_scores(terms, qtf, qlen, text.query_grams("the store"))
    query = mem.meaning.encode([FINDINGS[4]])[0]
    doc_of = {f: d for d, f in zip(cs.matched.tolist(), ids)}
    docs = np.array(sorted(doc_of.values()))
    cos = index.vectors.cosine(docs, query)
    pool, pick = docs[:1], docs[1:2]  # (one in the pool, one the cells found already)
    got, near = _with_word_matches(index, cs, pool, query, -1.0, -1, pick, cos[1:2].astype(np.float32))
    assert got.tolist() == docs[1:].tolist() and np.allclose(near, cos[1:], atol=1e-6)
    high = float(np.sort(cos[1:])[-2]) + 1e-9  # (only the closest reaches it)
    got, near = _with_word_matches(index, cs, pool, query, high, -1, np.empty(0, np.int64), np.empty(0, np.float32))
    assert got.tolist() == [int(docs[1:][np.argmax(cos[1:])])]
    got, _ = _with_word_matches(index, cs, pool, query, 2.0, -1, pick, cos[1:2].astype(np.float32))
    assert got.tolist() == pick.tolist()  # (nothing reaches it: the cells' own, unchanged)
