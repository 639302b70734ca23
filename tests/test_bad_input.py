"""Bad input, generated with hypothesis, through the engine's public methods and the magics:
only the documented errors come out (`SlmMagicError` subclasses from the engine, one-line
`UsageError`s from the magics), and every memory stored before is unchanged afterwards (a full
export before and after, compared field by field)."""

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from slm_magic import Memory
from slm_magic.errors import SlmMagicError
from slm_magic.results.models import MEMORY_TYPES
from slm_magic.engine.validate import MAX_CONTENT_CHARS

NASTY = st.sampled_from([
    "", " ", "\t\n ", "\x00", "a\x00b", "'", '"', "`", "';--", "'; DROP TABLE memories; --", '"); DELETE FROM feedback; --',
    "\\", "%", "_%'", "${HOME}", "{0}", "%s", "\u202e\u200b", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "NULL", "null", "[]", "{}", "<private>",
    "</private>", "<private>x", "a" * 400, "ß" * 50, "\ud7ff", "e\u0301", "１２３", "-1", "0", "1e309", "NaN",
])
TEXT = st.one_of(st.text(max_size=120), NASTY, st.builds(lambda a, b: a + b, NASTY, st.text(max_size=20)))
ANY = st.one_of(TEXT, st.none(), st.integers(), st.floats(allow_nan=True), st.booleans(), st.lists(TEXT, max_size=3),
                st.binary(max_size=10))
LIMITS = st.one_of(st.integers(-3, 12), st.sampled_from([0, -1, 10**9, 2**63, -(2**63)]), st.floats(allow_nan=True),
                   st.none(), st.booleans(), st.text(max_size=3))
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
BASELINE_TOPIC = "baseline/topic-7f3c"


def snapshot(mem: Memory, path) -> dict:
    """Every stored memory of every user, by id, as a full export writes it."""
    out = {}
    users = [u for (u,) in mem.store.con.execute("SELECT DISTINCT user_id FROM memories").fetchall()]
    for i, user in enumerate(users):
        target = path.parent / f"{path.stem}-{i}.jsonl"
        mem.export(target, user_id=user)
        for line in target.read_bytes().split(b"\n"):
            if line:
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    raise AssertionError(f"export wrote a line JSON cannot read: {line!r}") from exc
                out[row["fact_id"]] = row
    return out


@pytest.fixture
def store(tmp_path):
    mem = Memory(tmp_path / "memory.duckdb", user_id="ana")
    sid = mem.session_init(max_results=0).session_id
    mem.remember("The left join on customer_id drops 3% of rows", tags="join", session_id=sid, project="churn")
    mem.remember("Dropped tenure_days: it leaks the label", type="decision", core=True, session_id=sid)
    mem.mem_save("ana", "Churn means 90 days without a login", type="preference", title="churn",
                 topic_key=BASELINE_TOPIC)
    mem.mem_save("bob", "bob's own note about forecasting", type="pattern", title="forecast")
    before = snapshot(mem, tmp_path / "before.jsonl")
    yield mem
    after = snapshot(mem, tmp_path / "after.jsonl")
    assert {k: after.get(k) for k in before} == before  # nothing stored before changed or went missing
    mem.close()


def documented(call):
    """Run `call`; an engine error must be a documented one (a SlmMagicError)."""
    try:
        return call()
    except SlmMagicError as exc:
        assert str(exc) and "\n" not in str(exc).strip()
        return exc


@SETTINGS
@given(content=st.one_of(TEXT, st.just("x" * (MAX_CONTENT_CHARS + 1)), ANY),
       tags=st.one_of(TEXT, st.lists(TEXT, max_size=4), ANY),
       project=ANY, type_=st.one_of(st.sampled_from(MEMORY_TYPES), TEXT, ANY), title=ANY, topic=ANY, user=ANY, cell=ANY)
def test_remember_takes_anything_and_fails_only_as_documented(store, content, tags, project, type_, title, topic,
                                                              user, cell):
    got = documented(lambda: store.remember(content, tags=tags, project=project, type=type_, title=title,
                                            topic_key=topic, user_id=user, cell=cell))
    if not isinstance(got, Exception):
        assert got.content.strip() and "\x00" not in got.content and len(got.content) <= MAX_CONTENT_CHARS
        assert store.get(got.fact_id, user_id=got.user_id) == got


@SETTINGS
@given(query=ANY, limit=LIMITS, project=ANY, user=ANY, session=ANY, days=LIMITS, kind=ANY)
def test_recall_takes_anything_and_fails_only_as_documented(store, query, limit, project, user, session, days, kind):
    got = documented(lambda: store.recall(query, limit=limit, project=project, user_id=user, session_id=session,
                                          max_age_days=days, kind=kind))
    if not isinstance(got, Exception):
        assert len(got.memories) <= limit and all(0 <= m.relevance <= 1 for m in got.memories)


@SETTINGS
@given(fact_id=st.one_of(ANY, st.text(alphabet=string.hexdigits, min_size=16, max_size=16)), signal=ANY,
       content=ANY, core=ANY, rank=LIMITS)
def test_actions_on_ids_fail_only_as_documented(store, fact_id, signal, content, core, rank):
    assert documented(lambda: store.get(fact_id)) is None
    for call in (lambda: store.pin(fact_id, core), lambda: store.forget(fact_id),
                 lambda: store.feedback(fact_id, signal, rank=rank), lambda: store.revise(fact_id, content=content),
                 lambda: store.close_session(fact_id)):
        documented(call)


@SETTINGS
@given(user=ANY, content=ANY, type_=st.one_of(st.sampled_from(MEMORY_TYPES), ANY), title=ANY, topic=ANY, query=ANY,
       limit=LIMITS, types=st.one_of(st.none(), st.lists(st.one_of(st.sampled_from(MEMORY_TYPES), TEXT), max_size=3),
                                     ANY), obs=ANY, summary=ANY)
def test_the_observations_api_fails_only_as_documented(store, user, content, type_, title, topic, query, limit, types,
                                                        obs, summary):
    saved = documented(lambda: store.mem_save(user, content, type=type_, title=title, topic_key=topic))
    if not isinstance(saved, Exception):
        assert saved.outcome in ("created", "updated", "deduped")
        assert store.mem_get_observation(user, saved.id).content.strip()
    found = documented(lambda: store.mem_search(user, query, limit=limit, types=types))
    if not isinstance(found, Exception):
        assert len(found) <= limit and all(o.type in (*MEMORY_TYPES, "summary") for o in found)
    for call in (lambda: store.mem_search(user, query, types_exclude=types),
                 lambda: store.mem_get_observation(user, obs), lambda: store.mem_timeline(user, obs),
                 lambda: store.mem_stats(user), lambda: store.mem_session_start(user),
                 lambda: store.mem_session_summary(user, summary), lambda: store.session_init(
                     project_path=title, query=query, max_results=limit, max_age_days=limit)):
        documented(call)


@SETTINGS
@given(name=st.text(alphabet=string.ascii_letters + string.digits + " '\";-%$`{}()[]&|<>*?!#ßé𝔘", min_size=1,
                    max_size=30), suffix=st.sampled_from([".jsonl", ".parquet", ".csv", "", ".json"]),
       garbage=st.binary(max_size=200))
def test_export_and_import_paths_with_any_characters(store, tmp_path, name, suffix, garbage):
    target = tmp_path / "exports" / f"{name}{suffix}"
    got = documented(lambda: store.export(target))
    if not isinstance(got, Exception):
        assert documented(lambda: store.import_file(target)) == 0  # everything in it is already here
    junk = tmp_path / f"junk-{name}{suffix}"
    junk.write_bytes(garbage)
    documented(lambda: store.import_file(junk))
    documented(lambda: store.import_file(tmp_path / "missing" / f"{name}{suffix}"))


@pytest.fixture
def ip(tmp_path, monkeypatch):
    monkeypatch.setenv("SLM_MAGIC_DB", str(tmp_path / "magic.duckdb"))
    monkeypatch.chdir(tmp_path)
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "slm_magic")
    shell.run_cell("%%remember --tags base --core\nA memory from before the fuzzing, about joins.", store_history=True)
    with Memory(tmp_path / "magic.duckdb") as mem:
        before = snapshot(mem, tmp_path / "m-before.jsonl")
    yield shell
    shell.run_line_magic("unload_ext", "slm_magic")
    InteractiveShell.clear_instance()
    with Memory(tmp_path / "magic.duckdb") as mem:
        after = snapshot(mem, tmp_path / "m-after.jsonl")
    assert {k: after.get(k) for k in before} == before


LINE = st.one_of(TEXT, st.builds(lambda o, v: f"{o} {v}", st.sampled_from(
    ["--limit", "-n", "--type", "--project", "--tags", "--title", "--topic", "--max-results", "--max-age-days",
     "--user", "--query", "--summary", "--core", "--bogus", "-x", "--"]), TEXT))
MAGICS = ["recall", "slm_start", "slm_status", "slm_pin", "slm_unpin", "slm_forget", "slm_feedback", "slm_close",
          "slm_export", "slm_import"]


@SETTINGS
@given(magic=st.sampled_from(MAGICS), line=LINE, cell=TEXT)
def test_magics_fail_only_with_a_usage_error(ip, magic, line, cell):
    line = line.replace("/", "_").replace("\x00", "")  # (export paths stay in the test's folder)
    try:
        ip.run_line_magic(magic, line)
    except UsageError as exc:
        assert str(exc).strip() and "Traceback" not in str(exc)
    try:
        ip.run_cell_magic("remember", line, cell)
    except UsageError as exc:
        assert str(exc).strip()


def test_labels_past_their_limits_are_refused_at_once_and_nothing_is_stored(tmp_path):
    """An assistant's remember with 100,000 tags held the file for 53 s (each tag was looked
    for among those before it) and a 1 MB title was taken; now each is a one-line refusal."""
    from slm_magic.engine.validate import MAX_PROJECT_CHARS, MAX_TAG_CHARS, MAX_TAGS, MAX_TITLE_CHARS

    with Memory(tmp_path / "m.duckdb") as mem:
        kept = mem.remember("kept", tags=[f"t{i}" for i in range(MAX_TAGS)], title="t" * MAX_TITLE_CHARS,
                            project="p" * MAX_PROJECT_CHARS)
        assert len(kept.tags) == MAX_TAGS
        for too_much, message in ((dict(tags=[f"t{i}" for i in range(100_000)]), f"more than {MAX_TAGS} tags"),
                                  (dict(tags="a," + "x" * (MAX_TAG_CHARS + 1)), "a tag has"),
                                  (dict(title="t" * (MAX_TITLE_CHARS + 1)), "title has"),
                                  (dict(project="p" * (MAX_PROJECT_CHARS + 1)), "project has")):
            with pytest.raises(SlmMagicError, match=message):
                mem.remember("refused", **too_much)
        assert mem.count() == 1


def test_text_in_another_encoding_is_refused_in_one_line_and_nothing_is_stored(tmp_path):
    """`printf 'caf\\xe9' | slm-magic remember -` (a Latin-1 terminal) ended in a UnicodeEncodeError
    traceback: Python hands a stray byte over as a lone surrogate, which no UTF-8 file can hold."""
    import subprocess
    import sys

    db = tmp_path / "m.duckdb"
    with Memory(db) as mem:
        kept = mem.remember("a café note")
        for call in (lambda: mem.remember("caf\udce9"), lambda: mem.remember("ok", tags="t\udce9"),
                     lambda: mem.remember("ok", title="t\udce9"),
                     lambda: mem.revise(kept.fact_id, content="caf\udce9")):
            with pytest.raises(SlmMagicError, match="is not UTF-8 text: character"):
                call()
        assert mem.count() == 1 and mem.get(kept.fact_id).content == "a café note"
    cli = [sys.executable, "-m", "slm_magic.cli", "--db", str(db)]
    for args, stdin in (([b"remember", b"-"], b"caf\xe9 from a pipe\n"), ([b"remember", b"caf\xe9 typed"], b"")):
        out = subprocess.run([*map(str, cli), *args], input=stdin, capture_output=True)
        assert out.returncode == 2 and b"Traceback" not in out.stderr, out.stderr[-500:]
        assert b"content is not UTF-8 text: character 4 is a stray byte" in out.stderr
    for args, said in (([b"remember", b"--topic", b"t\xe9", b"ok"], b"--topic is not UTF-8 text: character 2"),
                       ([b"--user", b"u\xe9", b"stats"], b"--user is not UTF-8 text: character 2")):
        out = subprocess.run([*map(str, cli), *args], capture_output=True)
        assert out.returncode == 2 and b"Traceback" not in out.stderr and said in out.stderr, out.stderr[-500:]
    with Memory(db) as mem:
        assert mem.count() == 1
