import pytest

import numpy as np
from slm_magic.core import text
from slm_magic.errors import InvalidInput
from slm_magic.core.text import STOP_WORDS, analyse, term_hash


def test_words_are_lowercased_and_stemmed():
    assert analyse("Running runners RUN") == ["run", "runner", "run"]


def test_stop_words_are_dropped_but_content_words_kept():
    terms = analyse("What did the system say about the computer?")
    assert "the" not in terms and "what" not in terms
    assert terms == ["system", "say", "comput"]


def test_identifiers_keep_the_whole_name_and_its_parts():
    assert analyse("df_churn_v2") == ["df_churn_v2", "df", "churn", "2"]
    assert analyse("customerId") == ["customerid", "custom", "id"]


def test_unicode_words_survive():
    terms = analyse("Los niños comieron ñoquis en Zürich; 東京 データ")
    assert {"zürich", "niño", "ñoqui", "東京", "データ"} <= set(terms)
    assert "東京" in terms and "データ" in terms


def test_nfkc_folds_compatibility_forms():
    assert analyse("ｆｕｌｌｗｉｄｔｈ") == analyse("fullwidth")


def test_punctuation_and_empty_input_give_no_terms():
    assert analyse("") == []
    assert analyse("  ... !!! --- ") == []
    assert all(w not in STOP_WORDS for w in analyse("it is what it is, and so on"))


def test_term_hash_is_stable_signed_64_bit():
    h = term_hash("churn")
    assert h == term_hash("churn") and h != term_hash("churns")
    assert -(2**63) <= h < 2**63
    # Fixed value: the hash must not change between processes or releases.
    assert term_hash("churn") == term_hash.__wrapped__("churn")


def test_latin_grams_get_exact_ids_and_others_hashed_ones_apart():
    latin = {text.gram_hash(g) for g in (" de", "ded", "edu", "dup", "up ", "ïve", "évé", "λόγ")}
    assert len(latin) == 8 and all(0 <= g < 2**30 for g in latin)  # packed: no two grams share one
    cjk = [text.gram_hash(g) for g in ("東京 ", " 東京", " デー", "データ")]
    assert len(set(cjk)) == 4 and all(-(2**31) <= g < 0 for g in cjk)  # hashed: never a packed id
    for term in ("deduplic", "zürich", "東京", "a東b"):  # a term's grams, each as gram_hash gives it
        w = f" {term} "
        assert text.term_grams(term) == tuple(text.gram_hash(w[i:i + 3]) for i in range(len(w) - 2))


def test_the_word_cache_filling_up_loses_no_word(monkeypatch):
    monkeypatch.setattr(text, "_HASHES_MAX", 5)
    monkeypatch.setattr(text, "_HASHES", {})
    first = text.term_ids("alpha beta gamma")
    text.term_ids("delta epsilon")
    assert text.term_ids("alpha zeta")[0] == first[0]  # alpha was cached, then the cache was cleared


def test_a_batch_is_analysed_exactly_as_memory_by_memory():
    """`Postings.of` on a bulk write (array arithmetic) and on single writes (one Counter per
    memory) must store the same postings: they are two ways to one analysis."""
    import random

    from slm_magic.index.analysis import BATCH_MIN, Postings

    rng = random.Random(5)
    vocab = ("the join on df_orders_v2 duplicated customerId rows; Straße café naïve résumé "
             "déjà vu 5pm 2nd v2 ﬁnance ＦＵＬＬ width churn churned churning a an of "
             "x y 42 3.14 user_id userID HTTPServer").split()
    n = BATCH_MIN * 3
    contents = [" ".join(rng.choices(vocab, k=rng.randint(1, 40))) for _ in range(n)]
    titles = [rng.choice([None, "", "Churn review", "df_orders_v2 dedup"]) for _ in range(n)]
    tags = [rng.choice([(), ("churn",), ("billing", "Q3-review")]) for _ in range(n)]
    projects = [rng.choice(["", "crm", "growth_model"]) for _ in range(n)]
    types = [rng.choice(["decision", "discovery", "summary"]) for _ in range(n)]
    batch = Postings.of(contents, titles, tags, projects, types)
    singles = [Postings.of([c], [t], [g], [p], [y]) for c, t, g, p, y in zip(contents, titles, tags, projects, types)]

    def per_memory(post, lengths, keys, values):
        ends = np.cumsum(lengths)
        return [dict(zip(keys[e - k:e].tolist(), values[e - k:e].tolist())) for k, e in zip(lengths.tolist(), ends)]

    assert per_memory(batch, batch.lengths, batch.terms, batch.tfs) == [
        per_memory(s, s.lengths, s.terms, s.tfs)[0] for s in singles]
    assert per_memory(batch, batch.glengths, batch.grams, batch.gtfs) == [
        per_memory(s, s.glengths, s.grams, s.gtfs)[0] for s in singles]
    assert batch.doc_len.tolist() == [int(s.doc_len[0]) for s in singles]
    assert sum(batch.doc_len.tolist()) > 0 and any(len(t or "") for t in titles)


def test_a_batch_is_cut_into_words_exactly_as_text_by_text():
    """`batch_words` cuts ASCII texts with a byte translation, all at once, and the others with
    the regex: the words must be the regex's, in order, whatever the texts hold (the mark it
    joins texts with, NUL, non-ASCII letters, ligatures NFKC unfolds)."""
    import random
    import unicodedata

    rng = random.Random(1)
    pieces = list("abcXYZ019_ -.,;:!?'\"\t\n\x01\x00é€ﬁＦß日本") + ["naïve", "df_x_v2", "customerId", " \x01 "]
    for _ in range(2000):
        texts = ["".join(rng.choices(pieces, k=rng.randint(0, 30))) for _ in range(rng.randint(0, 8))]
        if rng.random() < 0.5:
            texts = [t.encode("ascii", "ignore").decode() for t in texts]
        words, word, doc = text.batch_words(texts)
        got = [[] for _ in texts]
        for w, d in zip(word.tolist(), doc.tolist()):
            got[d].append(words[w])
        assert got == [text._WORD.findall(unicodedata.normalize("NFKC", t)) for t in texts], texts
        assert len(set(words)) == len(words)


def test_tags_of_a_bulk_write_are_normalised_as_one_by_one():
    from slm_magic.engine.validate import normalise_tags, tags_column

    values = [None, "", "a,b, a", ["x", "x ", "y"], ("x", "x ", "y"), ["x", "x ", "y"], {"s"}, ["a\x00b"]]
    got = tags_column(values)
    assert got == [list(normalise_tags(v)) for v in values]
    got[3].append("mutated")
    assert got[5] == ["x", "y"]  # each record has a list of its own
    with pytest.raises(InvalidInput):
        tags_column([["ok"], ["x", ["nested"]]])
    with pytest.raises(InvalidInput):
        tags_column([["ok"], 5])
