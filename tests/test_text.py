from slm_magic import text
from slm_magic.text import STOP_WORDS, analyse, term_hash


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


def test_the_word_cache_filling_up_loses_no_word(monkeypatch):
    monkeypatch.setattr(text, "_HASHES_MAX", 5)
    monkeypatch.setattr(text, "_HASHES", {})
    first = text.term_ids("alpha beta gamma")
    text.term_ids("delta epsilon")
    assert text.term_ids("alpha zeta")[0] == first[0]  # alpha was cached, then the cache was cleared
