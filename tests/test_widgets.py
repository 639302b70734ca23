"""The widgets' state without a kernel: what they show matches the engine, and their buttons
act on the real memory file."""

import asyncio
import html
import re
import selectors
from datetime import timedelta

import pytest

from slm_magic import Memory
from slm_magic.results.display import MUTED
from slm_magic.results.models import SEARCH_WEIGHTS
from slm_magic.widgets import ContextView, LiveSearch, MemoriesView, breakdown, segments, stacked_bar

FINDINGS = [
    ("The left join of orders on customer_id drops 3% of rows: 412 customers have no account.", "decision"),
    ("Dropped the tenure_days feature: it is computed after the churn date, so it leaks the label.", "decision"),
    ("Client (Ana): churn means 90 days without a login, not a cancelled contract.", "preference"),
    ("Gradient boosting beats logistic regression by 0.04 AUC on the March holdout.", "discovery"),
]


@pytest.fixture
def filled(db_path, clock):
    mem = Memory(db_path, clock=clock)
    sid = mem.session_init(max_results=0).session_id
    for text, kind in FINDINGS:
        mem.remember(text, type=kind, tags="churn", session_id=sid, notebook="/work/churn.ipynb", cell=3)
    mem.detach()  # as in a kernel: the file is held only while something runs
    yield mem
    mem.close()


def widths(bar_html: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"slm-seg slm-(\w+)' style='[^']*width:([\d.]+)%", bar_html)}


def test_rows_and_bars_match_the_engine(filled):
    with filled.attached():
        res = filled.recall("why was a feature dropped")
    view = MemoriesView.of(res, memory=filled)
    assert [r.fact.fact_id for r in view.rows] == [m.fact_id for m in res.memories]
    for row, m in zip(view.rows, res.memories):
        s = m.score
        assert f">{s.value:.3f}<" in row.bar.value
        parts = s.contributions()
        assert sum(parts.values()) == pytest.approx(s.value, abs=1e-9)  # the stack adds up to the score
        assert parts["relevance"] == pytest.approx(SEARCH_WEIGHTS[0] * s.relevance)
        shown = widths(row.bar.value)
        for seg in segments(s):
            if seg.width_pct > 0:
                assert shown[seg.part] == pytest.approx(100 * seg.amount, abs=0.06)
        assert "tenure_days" in view.rows[0].text.value
        assert row.meta.value.count("churn.ipynb [3]") == 1
        assert f">{m.fact_id[:8]}<" in row.meta.value and f"writeText('{m.fact_id}')" in row.meta.value
        assert all(f">{html.escape(t)}<" in row.meta.value for t in m.fact.tags)  # every tag, none cut
    # the parts appear on demand, each with its number
    assert all(r.parts.layout.display == "none" for r in view.rows)
    view.show_parts.value = True
    assert all(r.parts.layout.display is None for r in view.rows)
    top = res.memories[0].score
    for number in (top.bm25, top.tfidf, top.relevance, top.recency, top.revision):
        assert f">{number:.3f}<" in view.rows[0].parts.value


def test_a_higher_score_draws_a_longer_bar():
    from slm_magic.results.models import SearchScore

    low = SearchScore(value=0.3, relevance=0.2, bm25=0.2, tfidf=0.0, recency=0.5, revision=0.0)
    high = SearchScore(value=0.8, relevance=0.9, bm25=0.8, tfidf=0.5, recency=1.0, revision=0.2)
    assert sum(widths(stacked_bar(high)).values()) > sum(widths(stacked_bar(low)).values())
    assert "score 0.800" in breakdown(high) and "SearchScore" in breakdown(high)  # (the name in a tooltip)


def test_buttons_act_through_the_engine_and_rows_update_in_place(filled):
    with filled.attached():
        res = filled.recall("churn definition login")
        sid = filled.session_init(max_results=0).session_id
    view = MemoriesView.of(res, memory=filled, session_id=sid)
    row = view.rows[0]
    assert filled.feedback_count() == 0
    row.up.click()
    with filled.attached():
        assert filled.feedback_count() == 1
        signals = filled.store.con.execute("SELECT fact_id, signal, query, rank, session_id FROM feedback").fetchall()
    assert signals == [(row.fact.fact_id, "up", "churn definition login", 1, sid)]
    assert row.up.button_style == "success" and row.up.disabled and not row.down.disabled
    assert "marked useful" in view.status.value

    row.pin.click()
    with filled.attached():
        assert filled.get(row.fact.fact_id).is_core
    assert ">core<" in row.text.value and row.pin.button_style == "warning"
    row.pin.click()
    with filled.attached():
        assert not filled.get(row.fact.fact_id).is_core
    assert ">core<" not in row.text.value

    gone = view.rows[1]
    gone.forget.click()  # asks first: nothing deleted yet
    with filled.attached():
        assert filled.get(gone.fact.fact_id) is not None
    assert "forget for good?" in gone.actions.children[0].value
    gone.actions.children[2].click()  # "keep"
    assert gone.actions.children == (gone.up, gone.down, gone.pin, gone.forget)
    gone.forget.click()
    gone.actions.children[1].click()  # "forget"
    with filled.attached():
        assert filled.get(gone.fact.fact_id) is None
        assert gone.fact.fact_id not in [m.fact_id for m in filled.recall("churn definition login")]
    assert "line-through" in gone.text.value and gone.up.disabled and gone.pin.disabled


def test_an_engine_error_is_shown_in_the_view_not_raised(filled):
    with filled.attached():
        res = filled.recall("tenure_days leak")
        filled.forget(res.memories[0].fact_id)  # gone behind the view's back
    view = MemoriesView.of(res, memory=filled)
    view.rows[0].up.click()
    assert "this memory was forgotten" in view.status.value and view.rows[0].signal is None
    with filled.attached():
        other = MemoriesView.of(filled.recall("churn definition login"), memory=filled)
    other.rows[0].feedback("sideways")  # an error about something else is shown as the engine says it
    assert "forgotten" not in other.status.value and "sideways" in other.status.value
    assert not other.rows[0].forgotten


def test_a_view_without_a_memory_is_read_only(filled):
    with filled.attached():
        res = filled.recall("churn")
    view = MemoriesView.of(res)
    assert all(b.disabled for r in view.rows for b in (r.up, r.down, r.pin, r.forget))


def test_context_view_banners_timeline_and_new_or_continued(filled, clock):
    with filled.attached():
        first = filled.session_init(query="churn label leak", reuse=True)
        filled.close_session(first.session_id, summary="found the tenure_days leak")
        clock.now += timedelta(hours=1)
        init = filled.session_init(query="astronomy telescopes", reuse=True)
        again = filled.session_init(query="astronomy telescopes", reuse=True)
    view = ContextView(init, memory=filled)
    assert init.abstained and view.abstained_banner.layout.display is None
    assert init.abstention_reason in view.abstained_banner.value
    assert not init.degraded_mode and view.degraded_banner.layout.display == "none"
    assert "new session" in view.header.value and again.session_id == init.session_id and not again.is_new
    assert "continued session" in ContextView(again, memory=filled).header.value
    assert "found the tenure_days leak" in view.timeline.value and view.timeline.layout.display is None
    assert f"learning phase {init.learning.phase}" in view.header.value
    assert view.context_block.outputs[0]["data"]["text/markdown"] == init.context

    good = ContextView(first, memory=filled)
    assert not first.abstained and good.abstained_banner.layout.display == "none"
    assert [r.fact.fact_id for r in good.memories.rows] == [m.fact_id for m in first.memories]
    assert "tenure_days" in good.memories.rows[0].text.value


def test_context_view_shows_degraded_mode(filled):
    with filled.attached():
        filled.replica, filled.index_error = None, "switched off by the test"
        init = filled.session_init(query="churn")
    view = ContextView(init, memory=filled)
    assert init.degraded_mode and view.degraded_banner.layout.display is None


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a clock of its own: it stands still while callbacks run and jumps to the
    next timer when there is nothing else to do, so a pause in typing lasts exactly what the test
    says, however loaded the machine is."""

    def __init__(self):
        self.now = 0.0
        super().__init__(selector=_JumpingSelector(self))

    def time(self) -> float:
        return self.now


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self, loop: VirtualTimeLoop):
        super().__init__()
        self.loop = loop

    def select(self, timeout=None):
        if timeout is None:  # no timer to jump to: wait for real input
            return super().select(None)
        events = super().select(0)
        if not events:
            self.loop.now += timeout
        return events


def test_a_row_found_by_its_meaning_says_so(filled):
    """The quickstart promises that a memory found by meaning says "similar meaning": the text
    and the saved HTML did, the widget only in its chip's tooltip."""
    with filled.attached():
        result = filled.recall("customers missing after merging purchases")
        view = MemoriesView.of(result, memory=filled)
    assert result.memories and result.memories[0].similar
    assert "similar meaning" in view.rows[0].meta.value
    by_words = result.model_copy(update={"memories": [result.memories[0].model_copy(update={"similar": False})]})
    assert "similar meaning" not in MemoriesView.of(by_words, memory=filled).rows[0].meta.value


def test_a_live_search_keeps_the_options_it_was_opened_with(filled):
    """`%recall --type preference` with no query opened a search box that forgot the type."""
    everything = LiveSearch(filled, limit=5)
    everything.search("churn")
    assert {"decision", "preference"} <= {r.fact.type for r in everything.view.result.memories}
    preferences = LiveSearch(filled, limit=5, type="preference")
    preferences.search("churn")
    assert [r.fact.type for r in preferences.view.result.memories] == ["preference"]


def test_live_search_ranks_as_the_user_types_and_is_debounced(filled):
    search = LiveSearch(filled, limit=3)  # the debounce users get
    search.box.value = "tenure_days"  # no event loop here: searched at once
    assert search.view is not None and "tenure_days" in search.view.rows[0].text.value
    assert re.search(r"\d memor(y|ies) in [\d.]+ ms", search.timing.value)
    before = len(search.searches)

    async def type_then_stop():
        for text in ("jo", "joi", "join"):
            search.box.value = text
            await asyncio.sleep(0.8 * search.debounce_s)  # (loop time) the next keystroke comes first
        assert len(search.searches) == before  # nothing searched while the user types
        search.box.value = "join rows"
        typed, scheduled = loop.time(), search.pending
        assert scheduled is not None
        await scheduled  # the search of the text the user stopped at
        return loop.time() - typed

    loop = VirtualTimeLoop()
    try:
        waited = loop.run_until_complete(type_then_stop())
    finally:
        loop.close()
    assert [q for q, _ in search.searches[before:]] == ["join rows"]  # only what the user stopped at
    assert waited == pytest.approx(search.debounce_s)  # once it had stood still for the debounce
    assert "customer_id" in search.view.rows[0].text.value and search.pending is None
    search.box.value = "  "
    assert search.results.children == () and search.view is None


def test_context_view_shows_the_age_gate(db_path, clock):
    with Memory(db_path, clock=clock) as mem:
        mem.remember("pilot: mean area alone as the size feature", type="decision")
        clock.now += timedelta(days=200)
        mem.remember("collinear size features: keep mean radius")
        init = mem.session_init(query="size feature pilot", max_age_days=30)
        # (its days, one older match, shown: it matches strongly; the note said "left out" of it)
        assert init.age_gate == (30, 1, 1)
        view = ContextView(init, memory=mem)
        assert view.age_gate_note.layout.display is None
        assert "older than 30 days: 1 matching memory, shown because it matches" in view.age_gate_note.value
        off = mem.session_init(query="size feature pilot", max_age_days=0)
        assert off.age_gate is None and ContextView(off, memory=mem).age_gate_note.layout.display == "none"


def test_the_learned_part_is_drawn_and_a_negative_one_shortens_the_bar():
    from slm_magic.results.models import SearchScore

    up = SearchScore(value=0.75, relevance=0.5, bm25=0.5, tfidf=0.0, recency=1.0, revision=0.0, learned=0.2)
    w = widths(stacked_bar(up))
    assert w["learned"] == pytest.approx(20.0) and sum(w.values()) == pytest.approx(75.0, abs=0.2)
    assert "learned" in breakdown(up) and ">0.200<" in breakdown(up)
    down = SearchScore(value=0.45, relevance=0.5, bm25=0.5, tfidf=0.0, recency=1.0, revision=0.0, learned=-0.1)
    w = widths(stacked_bar(down))
    assert "learned" not in w and sum(w.values()) == pytest.approx(45.0, abs=0.2)
    assert ">-0.100<" in breakdown(down) and "#d62728" in breakdown(down)


def test_a_row_shows_where_its_memory_came_from_on_demand(db_path):
    with Memory(db_path) as mem:
        mem.remember("the groups are balanced", notebook="/w/eda.ipynb", cell=4, cell_id="c-42",
                     code="df.groupby('group').size()")
        view = MemoriesView.of(mem.recall("groups balanced"), memory=mem)
        row = view.rows[0]
        assert row.origin.layout.display == "none" and "groupby" not in row.origin.value  # read only when asked
        row.origin_button.click()
        assert row.origin.layout.display is None
        assert "eda.ipynb" in row.origin.value and "c-42" in row.origin.value
        assert html.escape("df.groupby('group').size()") in row.origin.value
        row.origin_button.click()
        assert row.origin.layout.display == "none"


def test_counts_read_as_words():
    from slm_magic.results.display import plural

    assert (plural(1, "memory", "memories"), plural(3, "memory", "memories")) == ("1 memory", "3 memories")


def test_a_row_marks_the_words_that_matched_and_says_how_well(mem):
    mem.remember("Dropped the tenure_days feature: it leaks the label", tags="churn,leakage", title="Feature leak",
                 session_id="s1")
    mem.remember("I prefer plotting with seaborn", session_id="s1")
    mem.remember("the churn window is 90 days", session_id="s2")
    res = mem.recall("why was a feature dropped leakage", related=True)
    view = MemoriesView.of(res, memory=mem)
    strong, related = view.rows
    assert res[0].strength == "strong" and res[1].strength == "related"
    marks = re.findall(r"<mark class='slm-hit'[^>]*>([^<]+)</mark>", strong.text.value + strong.meta.value)
    assert set(marks) == {"Dropped", "feature", "Feature", "leakage"}  # text, title and the tag, as the index matched
    assert "strong match 0." in strong.meta.value and "slm-match-strong" in strong.meta.value
    assert "slm-hit" not in related.text.value and "related same session as #1" in related.meta.value
    assert f"color:{MUTED}" in related.text.value  # a memory that matched nothing looks it
    weak = mem.recall("churn definition of the window in days for dropped seaborn plotting")
    assert {m.strength for m in weak} <= {"strong", "partial", "weak"}


def test_the_terminal_table_says_why_each_memory_matched(mem):
    mem.remember("Dropped the tenure_days feature: it leaks the label", tags="leakage", session_id="s1")
    mem.remember("I prefer plotting with seaborn", session_id="s1")
    text = str(mem.recall("feature dropped", related=True))
    assert "match on content: feature, dropped" in text
    assert "related: same session as #1 (it does not match the question itself)" in text


# --- a saved notebook (issue 25, 1) -------------------------------------------------------------
@pytest.fixture
def shell():
    """A real InteractiveShell, so that `display` publishes (as in a kernel) and can be captured."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def words_of(page: str) -> str:
    """An HTML page's text (the marks of matched words taken out)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def shown(obj) -> list:
    """What displaying `obj` publishes, output by output (data, and whether it is an update)."""
    from IPython.display import display
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        display(obj)
    return cap.outputs


def test_a_view_is_shown_as_its_saved_form_then_the_live_view(shell, filled):
    """First the result's HTML and text table (what a reopened notebook, nbconvert and GitHub
    show), then the widget, whose own text is one short line (not the table a second time)."""
    with filled.attached():
        res = filled.recall("why was a feature dropped")
        init = filled.session_init(query="churn label leakage")
    for view, text, words in ((MemoriesView.of(res, memory=filled), str(res), "Dropped the tenure_days feature"),
                              (ContextView(init, memory=filled), str(init), "tenure_days")):
        saved, live = shown(view)
        assert WIDGET_VIEW not in saved.data and saved.data["text/plain"] == text
        page = saved.data["text/html"]
        assert "class='slm-static'" in page and words in words_of(page) and "<style>" in page
        assert ".slm-live" in page  # the rule that hides it under a live view
        assert live.data[WIDGET_VIEW]["model_id"] == view.model_id and "slm-live" in view._dom_classes
        assert "\n" not in live.data["text/plain"] and len(live.data["text/plain"]) <= 80
        assert "VBox(" not in live.data["text/plain"]


def test_a_live_search_saves_what_it_last_found(shell, filled):
    search = LiveSearch(filled, limit=3)
    first, live = shown(search)
    assert "live search" in first.data["text/plain"] and "slm-static" in first.data["text/html"]
    assert live.data[WIDGET_VIEW]["model_id"] == search.model_id
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        search.box.value = "tenure_days"  # (no event loop: searched at once)
    (update,) = cap.outputs
    assert update.update and update.transient["display_id"] == first.transient["display_id"]
    assert "Dropped the tenure_days feature" in words_of(update.data["text/html"])
    assert "recall 'tenure_days'" in update.data["text/plain"]
    row = search.view.rows[0]
    with capture_output() as cap:  # forgotten here: the saved form leaves it out
        row.forget.click()
        row.actions.children[1].click()
    (update,) = cap.outputs
    assert update.update and "Dropped the tenure_days feature" not in words_of(update.data["text/html"])
    assert "Dropped the tenure_days" not in update.data["text/plain"]
    # (and it says what stood there, not that nothing matched)
    assert "1 memory found here was forgotten since" in words_of(update.data["text/html"])
    assert "1 memory found here was forgotten since" in update.data["text/plain"]
    from slm_magic.results.display import recall_html

    nothing_left = search.view.result.model_copy(update={"memories": []})
    assert "No memory matched" in recall_html(nothing_left)
    assert "No memory matched" not in recall_html(nothing_left, forgotten=1)


def test_a_pinned_memory_is_marked_in_words_not_an_emoji(filled):
    from slm_magic.results.display import recall_html, session_html, session_text

    with filled.attached():
        fid = filled.recall("tenure_days")[0].fact_id
        filled.pin(fid)
        res = filled.recall("tenure_days")
        init = filled.session_init(query="tenure_days")
    for page in (recall_html(res), session_html(init)):
        assert "📌" not in page and "class='slm-core'" in page and ">core<" in page
    assert "pinned" in session_text(init)
    context = ContextView(init, memory=filled).context_block.outputs[0]["data"]["text/markdown"]
    assert "📌" not in context and "fa-thumb-tack" in context and "Dropped the tenure_days feature" in context


# --- narrow windows, long memories (issue 25, 4) ------------------------------------------------
def test_a_long_memory_is_kept_whole_in_its_row_and_opens_in_place(mem):
    long = " ".join(f"step{i} of the cleaning pipeline drops a few rows" for i in range(60))  # ~3,000 characters
    mem.remember(long)
    row = MemoriesView.of(mem.recall("cleaning pipeline"), memory=mem).rows[0]
    assert "step59 of the cleaning pipeline drops a few rows" in words_of(row.text.value)  # the end, to read
    assert "slm-more" in row.text.value and "classList.toggle('slm-open')" in row.text.value


# --- a memory forgotten elsewhere (issue 25, 5) -------------------------------------------------
def test_a_memory_forgotten_elsewhere_says_so_and_its_row_greys_out(filled):
    with filled.attached():
        res = filled.recall("tenure_days leak")
    here, there = MemoriesView.of(res, memory=filled), MemoriesView.of(res, memory=filled)
    fid = res[0].fact_id
    with filled.attached():
        filled.forget(fid)  # behind both views' backs (another kernel, %slm_forget)
    here.rows[0].up.click()
    assert "this memory was forgotten" in here.status.value and "no memory with id" not in here.status.value
    row = here.rows[0]
    assert row.forgotten and "line-through" in row.text.value
    assert all(b.disabled for b in (row.up, row.down, row.pin, row.forget, row.origin_button))
    there.rows[0].origin_button.click()  # where from: the same
    assert "this memory was forgotten" in there.status.value and there.rows[0].forgotten


def test_forgetting_in_one_output_greys_the_memory_in_the_others(filled):
    with filled.attached():
        res = filled.recall("churn definition login")
    here, there = MemoriesView.of(res, memory=filled), MemoriesView.of(res, memory=filled)
    assert len(res) >= 2
    here.rows[0].forget.click()
    here.rows[0].actions.children[1].click()  # "forget"
    row = there.rows[0]
    assert row.forgotten and "line-through" in row.text.value and row.up.disabled
    assert not there.rows[1].forgotten and not there.rows[1].up.disabled


# --- a terminal's recall rows (issue 25, 10) ----------------------------------------------------
def _row_body(lines: list[str], rank: int) -> list[str]:
    """The memory text of row `rank` of a recall table (the column from character 29)."""
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{rank:>3}  "))
    body = [lines[at][29:]]
    for line in lines[at + 1:]:
        if re.match(r" {29}(strong match|match|weak match|related)", line):
            return body
        body.append(line[29:])
    return body


@pytest.mark.parametrize("shift", range(12))
def test_at_80_columns_a_recall_row_is_cut_between_words_and_says_so(mem, shift):
    from slm_magic.results.display import recall_text

    words = ("the monthly churn rate is computed on the other months of the warehouse snapshot "
             "and every month without a login counts").split()
    content = " ".join(["x" * (shift + 1), *words * 4])
    mem.remember(content)
    lines = recall_text(mem.recall("churn warehouse snapshot"), width=80).splitlines()
    assert all(len(line) <= 80 for line in lines)
    body = _row_body(lines, 1)
    assert body[-1].endswith("…"), body  # cut, and it says so
    shown = " ".join(body).removesuffix("…").split()
    assert shown == content.split()[:len(shown)]  # whole words, from the start, none cut


def test_wrap_marks_a_cut_and_leaves_a_text_that_fits_alone():
    from slm_magic.results.display import wrap

    assert wrap("a short line", 40, lines=3) == ["a short line"]
    cut = wrap("alpha beta gamma delta epsilon zeta eta theta", 12, 2, lines=2)
    assert cut == ["  alpha beta", "  gamma …"] and all(len(x) <= 12 for x in cut)


# --- "shared by you" ----------------------------------------------------------------------------
def test_a_memory_you_shared_says_shared_by_you(db_path, clock):
    from slm_magic.results.display import author_text, recall_html, recall_text, session_html

    with Memory(db_path, user_id="alice", clock=clock) as alice:
        alice.remember("churn means no login for 30 days, says the client", tags="churn", share=True)
        mine = alice.recall("churn login")
        init = alice.session_init(query="churn login")
        row = MemoriesView.of(mine, memory=alice).rows[0]
        assert "shared by you" in row.meta.value and "shared by alice" not in row.meta.value
        assert "shared by you" in ContextView(init, memory=alice).memories.rows[0].meta.value
        assert not row.pin.disabled and not row.forget.disabled  # hers to pin and forget
    fact = mine[0].fact
    assert author_text(fact, viewer="alice") == "shared by you" and author_text(fact) == "shared by alice"
    assert "shared by you" in recall_text(mine, viewer="alice") and "shared by you" in recall_html(mine, viewer="alice")
    assert "shared by you" in session_html(init, viewer="alice")
    with Memory(db_path, user_id="bob", clock=clock) as bob:
        theirs = bob.recall("churn login")
        row = MemoriesView.of(theirs, memory=bob).rows[0]
        assert "shared by alice" in row.meta.value and "shared by you" not in row.meta.value
        assert row.pin.disabled and row.forget.disabled
        assert "shared by alice" in recall_text(theirs, viewer="bob")


def _html_of(widget) -> list[str]:
    """The HTML of every widget in a view's tree."""
    import ipywidgets as W

    out = [widget.value] if isinstance(widget, W.HTML) else []
    for child in getattr(widget, "children", ()):
        out += _html_of(child)
    return out


def test_no_text_colour_is_fixed_without_its_own_background(filled):
    """In JupyterLab's dark theme the text is light: a fixed dark grey (#333, #555) was unreadable
    on it, and a light chip with the theme's text colour (a matched word on #fff3a3) too. A fixed
    colour stands only with a background of its own; the rest are the theme's variables."""
    from slm_magic.results.display import recall_html

    with filled.attached():
        init = filled.session_init(query="churn label leak")
        res = filled.recall("churn tenure_days leak")
    view = MemoriesView.of(res, memory=filled)
    view.show_parts.value = True
    pages = _html_of(view) + _html_of(ContextView(init, memory=filled)) + [recall_html(res)]
    blocks = [b for page in pages for b in re.findall(r"style='([^']*)'|style=\"([^\"]*)\"|\{([^{}]*)\}", page)]
    styles = [next(part for part in b if part) for b in blocks if any(b)]
    fixed = [s for s in styles if re.search(r"(?<![-\w])color:\s*#", s)]
    assert fixed and all("background" in s for s in fixed), [s for s in fixed if "background" not in s]
    assert any("var(--jp-ui-font-color" in s for s in styles)


def test_at_80_columns_a_long_title_leaves_room_for_the_memory_itself(mem):
    """A 66-character title filled the terminal row's three lines: the URL it titled, the
    answer, was never shown (in %recall and %slm_list alike)."""
    from slm_magic.results.display import page_text, recall_text

    mem.remember("See https://example.com/rules for the join rules.", tags="join",
                 title="A really long title that keeps going for a while to test wrapping")
    for text in (recall_text(mem.recall("join rules"), width=80), page_text(mem.browse(), width=80)):
        assert "https://example.com/rules" in text and "A really long title that keeps going for…" in text
        assert all(len(line) <= 80 for line in text.splitlines())


def test_a_session_in_a_terminal_reads_as_plain_lines(mem):
    """The terminal's %slm_start printed the context block's markdown ("# Relevant Memory
    Context", "_No relevant memories yet._") under a line that had said so already."""
    from slm_magic.results.display import session_text

    empty = session_text(mem.session_init(), width=200).splitlines()
    assert len(empty) == 2 and empty[1].startswith("no memories yet")  # (the header, then that line: all)
    mem.remember("the churn join doubles rows")
    shown = session_text(mem.session_init(), width=200)
    assert "#" not in shown and "_" not in shown and "\n- the churn join doubles rows (" in shown
    assert shown.splitlines()[1].startswith("No question was given")


def test_a_memory_s_control_characters_never_reach_a_terminal(mem):
    """A memory holding an escape sequence (from an assistant or an import) recoloured the
    reader's terminal through `slm-magic list` and %slm_list."""
    from slm_magic.results.display import page_text, recall_text, session_text

    fact = mem.remember("x \x1b[31mred\x1b[0m note \x07 with a bell\r over")
    shown = [page_text(mem.browse(), width=80), recall_text(mem.recall("red note bell"), width=80), str(fact),
             session_text(mem.session_init(query="red note bell"), width=80)]
    assert all("red" in text and not any(ch in text for ch in "\x1b\x07\r") for text in shown), shown
    # (nor a right-to-left override, which made the rest of the row read backwards)
    flipped = mem.remember("invoice \u202etotal\u202c and \u2067tax\u2069 checked")
    shown = [page_text(mem.browse(), width=80), recall_text(mem.recall("invoice total"), width=80), str(flipped)]
    assert all("invoice" in text and not any(ch in text for ch in "\u202e\u202c\u2067\u2069") for text in shown)


def test_a_session_held_back_by_the_age_gate_says_so_once_in_a_terminal(db_path, clock):
    """"nothing here answers …: 1 matching memory is older than 30 days …" was followed by
    "older than 30 days: 1 matching memory left out …", the same thing twice."""
    from slm_magic.results.display import session_text

    with Memory(db_path, clock=clock) as mem:
        mem.remember("pilot: mean area alone as the size feature", type="decision")
        clock.now += timedelta(days=200)
        init = mem.session_init(query="feature store latency budget", max_age_days=30)
    text = session_text(init, width=200)
    assert init.abstained and "(the age gate" in init.abstention_reason
    assert text.count("older than 30 days") == 1, text
