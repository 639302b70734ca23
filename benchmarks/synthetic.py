"""Deterministic synthetic memories for a data-science notebook memory tool.

The speed benchmark needs corpora of 10k to 1M memories whose *lexical*
statistics look like the real thing: a heavy-tailed (Zipf-like) vocabulary of
tens of thousands of word types, snake_case identifiers, numbers and dates,
and texts of varied length.  A few thousand recycled words would make posting
lists, dictionaries and caches unrealistically small and flatter every index.

Vocabulary (built once per process, then cached):

* real English words ranked by frequency, merged from a list of function
  words, the LoCoMo conversations (if the file is found), Python's own
  reference docs (``pydoc_data``) and the standard library's docstrings and
  comments; plus a hand-written data-science lexicon;
* a long tail of generated tokens: typos of real words, inflected and
  derived forms, coined names (vendors, products), and snake_case
  identifiers built from real words.

Memories combine finding-style sentence templates (``"the join on
customer_id drops 3.2% of rows"``) whose slots come from per-project pools of
dataframes, columns, tables and files, with free-text clauses drawn from the
Zipf vocabulary.  Lengths are log-normal (8-80 whitespace tokens).

Everything is drawn from seeded ``numpy.random.Generator`` streams, and the
draws never depend on ``n``: ``generate_memories(10_000)`` is exactly the
first 10k of ``generate_memories(100_000)`` except for ``created_at``, which
is stretched so that any ``n`` spans about two years.  The vocabulary depends
only on the Python version and on whether the LoCoMo file is present.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
import re
import sysconfig
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from collections.abc import Iterable, Iterator

import numpy as np

__all__ = ["generate_memories", "generate_queries", "vocabulary", "MEMORY_TYPES"]

MEMORY_TYPES = ("profile", "preference", "decision", "pattern", "discovery")
_TYPE_WEIGHTS = (0.07, 0.13, 0.20, 0.15, 0.45)

_VOCAB_SEED = 20240601  # fixes the generated tail, independently of the memory seed
_VOCAB_SIZE = 90_000
_REAL_HEAD = 5_000  # top real words keep their frequency rank; the rest mixes with generated tokens
_ZIPF_S, _ZIPF_Q = 1.0, 2.7  # Zipf-Mandelbrot, close to English text

_START = datetime(2023, 6, 1, tzinfo=timezone.utc)
_SPAN_DAYS = 730

_REPO = Path(__file__).resolve().parent.parent
_LOCOMO_CANDIDATES = (
    _REPO.parent / "shared" / "data" / "locomo" / "locomo10.json",
    Path("/work/shared/data/locomo/locomo10.json"),
)

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")

# --------------------------------------------------------------------------
# Hand-written lexicon: what notebook memories are about.

_DS_LEXICON = """
dataframe dataset column columns row rows index join merge groupby aggregate pivot melt
pipeline feature features target label labels model models training validation holdout
baseline metric metrics accuracy precision recall auc roc rmse mae mape logloss f1 r2
outlier outliers null nulls missing impute imputation duplicate duplicates dedup schema
dtype dtypes cast parse timestamp timezone partition parquet csv json sql query queries
notebook cell kernel plot chart histogram scatter heatmap boxplot distribution skew
sample sampling stratified split fold folds cross leakage drift bias variance overfit
underfit regularization hyperparameter hyperparameters tuning grid search optuna seed
cohort retention churn conversion funnel revenue pricing elasticity forecast forecasting
seasonality trend lag lags rolling window embedding embeddings cluster clustering kmeans
pca umap tsne encoder encoding onehot categorical numeric continuous binary threshold
calibration shap importance coefficient coefficients residual residuals anomaly anomalies
backfill etl warehouse snowflake bigquery redshift postgres duckdb spark polars pandas
numpy scipy sklearn xgboost lightgbm catboost statsmodels prophet pytorch tensorflow
matplotlib seaborn plotly altair dask ray airflow dbt jupyter vscode git commit branch
experiment experiments ab test variant control uplift lift significance pvalue confidence
interval bootstrap posterior prior bayesian regression classifier classification ranking
recommendation recommender session sessions event events user users customer customers
order orders product products store stores region regions sku inventory supplier campaign
""".split()

# Function words: kept common in the ranking, and skipped when picking query keywords.
_STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it
its itself just me more most my myself no nor not now of off on once only or other our ours
out over own same she should so some such than that the their theirs them then there these
they this those through to too under until up very was we were what when where which while
who whom why will with would you your yours yourself
""".split())

_DOMAIN_NOUNS = """
customer order product store region user account session event invoice payment item sku
campaign channel device country city supplier warehouse shipment ticket agent visit click
page subscription plan price discount coupon refund transaction merchant category brand
employee patient claim policy loan transaction_type signup cohort contract vendor route
driver trip delivery basket cart review rating survey response lead opportunity deal
""".split()

_COL_SUFFIXES = (
    "id", "ts", "date", "amt", "amount", "cnt", "count", "pct", "rate", "flag", "type", "code",
    "name", "score", "value", "total", "avg", "7d", "30d", "90d", "ltv", "status", "segment",
)
_COL_PREFIXES = ("is", "has", "n", "avg", "max", "min", "last", "first", "total", "days_since")
_SCHEMAS = ("raw", "staging", "analytics", "marts", "ml", "reporting", "sandbox")
_TABLE_KINDS = ("daily", "events", "snapshot", "facts", "dim", "history", "agg", "features")
_FILE_EXTS = ("parquet", "csv", "feather", "json", "pkl", "xlsx")

_PROJECT_TOPICS = """
churn-prediction pricing-elasticity fraud-detection demand-forecast customer-ltv ab-testing
recsys-ranking marketing-attribution marketing-mix credit-risk inventory-planning
support-tickets-nlp anomaly-alerts survey-analysis retention-dashboard supply-chain
search-relevance ad-click-model energy-load clinical-trials sales-pipeline hr-attrition
web-analytics payment-failures delivery-eta store-footfall price-monitoring
claims-triage sensor-maintenance content-moderation
""".split()

_TAGS = (
    "eda", "data-quality", "features", "modeling", "sql", "viz", "performance", "bug",
    "pipeline", "metrics", "join", "cleaning", "evaluation", "deployment", "reporting",
    "timeseries", "experiment", "docs", "todo", "stakeholder",
)

_POOLS: dict[str, tuple[str, ...]] = {
    "lib": (
        "pandas", "polars", "duckdb", "numpy", "scikit-learn", "matplotlib", "seaborn", "plotly",
        "statsmodels", "pyspark", "sqlalchemy", "xgboost", "lightgbm", "pyarrow", "dask", "altair",
    ),
    "model": (
        "xgboost", "lightgbm", "catboost", "logistic regression", "random forest", "a ridge model",
        "prophet", "arima", "a small mlp", "gradient boosting", "kmeans", "isolation forest",
        "a linear baseline", "naive bayes", "elastic net",
    ),
    "metric": (
        "auc", "f1", "rmse", "mae", "mape", "precision@10", "recall@50", "log loss", "r2",
        "ndcg@10", "accuracy", "brier score", "lift@5%",
    ),
    "task": (
        "feature engineering", "plotting", "sql queries", "large joins", "time series",
        "reporting", "model training", "data cleaning", "eda", "window functions",
        "quick prototypes", "dashboards",
    ),
    "plot": ("histogram", "scatter plot", "box plot", "line chart", "heatmap", "bar chart", "pair plot"),
    "fmt": (
        "markdown tables", "bullet points", "a single number", "a plot", "polars frames",
        "csv exports", "short summaries", "code cells",
    ),
    "dtype": ("object", "float64", "int64", "category", "datetime64[ns]", "string", "bool"),
    "agg": ("median", "mean", "sum", "max", "min", "count", "p90", "p99", "std"),
    "split": ("validation", "test", "holdout", "train", "out-of-time", "backtest"),
    "pctile": ("95th", "99th", "99.9th", "90th"),
    "color": ("grey", "blue", "orange", "red", "green", "purple", "viridis", "a muted palette"),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "tz": ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "PST", "CET", "Asia/Tokyo"),
    "role": (
        "data scientist", "analytics engineer", "ml engineer", "analyst", "product manager",
        "researcher", "student", "data engineer", "statistician",
    ),
    "person": (
        "Ana", "Ben", "Chen", "Dara", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi",
        "Luca", "Maya", "Nikhil", "Olga", "Pedro", "Quinn", "Rosa", "Sven", "Tara", "Umar",
        "Vera", "Wei", "Ximena", "Yusuf", "Zoe",
    ),
    "connector": ("Note:", "Context:", "Because", "Also", "See", "e.g.", "Otherwise", "Checked:", "TODO:"),
    "reason": (
        "it is faster on {int} rows", "{col} is too sparse", "it handles {w} better",
        "the {metric} is higher", "{person} asked for it", "it avoids the {w} issue",
        "{col} leaks the label", "it is easier to explain to {person}",
        "the old one broke on {date}", "memory use was {mem}",
    ),
}

_TEMPLATES: dict[str, tuple[str, ...]] = {
    "discovery": (
        "the join on {col} drops {pct} of rows",
        "{df} has {int} duplicate rows on {col}",
        "{col} is null in {pct} of rows before {date}",
        "{col} and {col} are correlated (r={corr})",
        "{model} gets {metric} of {score} on the {split} set",
        "{table} is missing data between {date} and {date}",
        "{col} has outliers above {int}, mostly from {w} {w}",
        "after dedup {df} went from {int} to {int} rows",
        "{col} values in {table} are strings with trailing spaces",
        "{pct} of {col} values fall outside the expected range",
        "the {agg} of {col} by {col} looks off for {w}",
        "{df} and {df} disagree on {col} for {int} ids",
        "timestamps in {table} are in {tz}, not UTC",
        "the spike in {col} on {date} comes from a {w} backfill",
        "feature importance: {col} first, then {col} and {col}",
        "{col} leaks the target; {metric} dropped from {score} to {score} without it",
        "class balance is {pct} positive in {df}",
        "loading {file} takes {secs} s with {lib}",
        "{df} uses {mem} of memory; casting {col} to category saves most of it",
        "{int} rows of {df} have {col} later than {col}",
        "the {w} segment has {pct} higher {col} than the rest",
    ),
    "decision": (
        "use {model} instead of {model} because {reason}",
        "drop {col} from the feature set since {reason}",
        "{df} is the source of truth for {col}",
        "train on data before {date} and validate on the rest",
        "fill missing {col} with the {agg} per {col}",
        "switched from {lib} to {lib} for {task}",
        "keep {n} folds of time-based cross validation",
        "report {metric} and {metric} in the weekly summary",
        "cap {col} at the {pctile} percentile",
        "read {table} through {lib} and cache it as {file}",
        "agreed with {person} to exclude {w} accounts from {df}",
    ),
    "pattern": (
        "every time {df} is reloaded {col} comes back as {dtype}",
        "{table} refresh is late on {weekday}s",
        "merges on {col} need {col} as well, otherwise rows fan out",
        "when {col} is zero {col} is usually missing too",
        "the user usually starts with a {plot} of {col}",
        "{lib} warns about {w} {w} whenever {df} is sliced",
        "{metric} drifts down by about {pct} each month",
        "questions about {project} mostly come in on {weekday}",
        "{col} resets to zero after each {w} release",
    ),
    "preference": (
        "prefers {lib} over {lib} for {task}",
        "wants {plot}s with {col} on a log scale",
        "likes results as {fmt}",
        "prefers short answers with code first",
        "always sort {df} by {col} descending",
        "use {n} decimal places for {metric}",
        "name new dataframes like {df}",
        "use {color} for {col} in charts, never {color}",
    ),
    "profile": (
        "{person} is a {role} on the {project} project",
        "{person} works in {tz} and mostly uses {lib}",
        "the team owns {table} and {table}",
        "{person} reports to {person} and reviews {task} work",
        "{person} knows {lib} well but is new to {lib}",
    ),
}

_SLOT = re.compile(r"\{(\w+)\}")


def _compile(template: str) -> tuple[tuple[bool, str], ...]:
    """Pre-split a template into (is_slot, text) parts so filling is a flat loop."""
    parts, pos = [], 0
    for m in _SLOT.finditer(template):
        if m.start() > pos:
            parts.append((False, template[pos : m.start()]))
        parts.append((True, m.group(1)))
        pos = m.end()
    if pos < len(template):
        parts.append((False, template[pos:]))
    return tuple(parts)


_COMPILED = {t: tuple(_compile(s) for s in ts) for t, ts in _TEMPLATES.items()}
_REASONS = tuple(_compile(s) for s in _POOLS["reason"])

# --------------------------------------------------------------------------
# Vocabulary


def _locomo_texts() -> Iterator[str]:
    """Conversation turns and questions: a few hundred thousand words of casual English."""
    path = os.environ.get("SLM_MAGIC_LOCOMO")
    candidates = (Path(path),) if path else _LOCOMO_CANDIDATES
    for p in candidates:
        if p.is_file():
            for sample in json.loads(p.read_text(encoding="utf-8")):
                for turns in sample["conversation"].values():
                    if isinstance(turns, list):
                        for turn in turns:
                            yield turn.get("text", "")
                for qa in sample.get("qa", ()):
                    yield str(qa.get("question", ""))
            return


def _stdlib_prose() -> Iterator[str]:
    """Docstrings and comments of the standard library: technical English that ships with Python."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    prose = re.compile(r'"""(.*?)"""|#([^\n]*)', re.S)
    # encodings/ is mostly "LATIN CAPITAL LETTER ..." comments, which would skew the ranking.
    skip = {"test", "tests", "idle_test", "site-packages", "dist-packages", "lib2to3", "encodings"}
    files = []
    for root, dirs, names in os.walk(lib):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith(("__", "."))]
        files += [os.path.join(root, n) for n in names if n.endswith(".py")]
    for path in sorted(files):  # walk order differs between file systems
        text = Path(path).read_text(encoding="utf-8", errors="ignore")
        for m in prose.finditer(text):
            yield m.group(1) or m.group(2)


def _real_word_ranking() -> list[str]:
    """Real words, most frequent first; each source gets equal weight so none dominates."""
    from pydoc_data import topics

    sources = [
        _locomo_texts(),
        iter(topics.topics.values()),
        _stdlib_prose(),
    ]
    score: Counter[str] = Counter()
    for texts in sources:
        counts = Counter(_WORD.findall("\n".join(texts).lower()))
        total = sum(counts.values())
        for w, c in counts.items():
            if len(w) <= 18:
                score[w] += c / total
    # The lexicon and stop words must be present and reasonably common whatever the sources say.
    for w in _DS_LEXICON:
        score[w] += 2e-5
    for w in _STOP_WORDS:
        score[w] += 1e-4
    words = [w for w in score if len(w) > 1 or w in ("a", "i")]
    words.sort(key=lambda w: (-score[w], w))
    return words


def _typos(words: list[str], rng: np.random.Generator, n: int) -> list[str]:
    """Realistic misspellings (swap, drop, double a letter): a genuine part of notes' long tail."""
    out: list[str] = []
    picks = rng.integers(0, len(words), size=n * 2)
    kinds = rng.integers(0, 3, size=n * 2)
    where = rng.random(n * 2)
    for w_i, kind, at in zip(picks.tolist(), kinds.tolist(), where.tolist()):
        w = words[w_i]
        if len(w) < 5 or "'" in w:
            continue
        i = 1 + int(at * (len(w) - 2))
        if kind == 0:
            t = w[: i - 1] + w[i] + w[i - 1] + w[i + 1 :]
        elif kind == 1:
            t = w[:i] + w[i + 1 :]
        else:
            t = w[:i] + w[i] + w[i:]
        out.append(t)
        if len(out) >= n:
            break
    return out


_SUFFIXES = ("s", "ed", "ing", "er", "ers", "ly", "ness", "able", "ation", "ize", "ized", "ish", "less")


def _derived(words: list[str], rng: np.random.Generator, n: int) -> list[str]:
    """Inflected and derived forms (``dedups``, ``resampling``): rare, word-like, often real."""
    out: list[str] = []
    picks = rng.integers(0, len(words), size=n * 2)
    sufs = rng.integers(0, len(_SUFFIXES), size=n * 2)
    for w_i, s_i in zip(picks.tolist(), sufs.tolist()):
        w, suf = words[w_i], _SUFFIXES[s_i]
        if len(w) < 4 or not w.isalpha():
            continue
        if w.endswith("e") and suf[0] in "aeiou":
            w = w[:-1]
        out.append(w + suf)
        if len(out) >= n:
            break
    return out


_ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "j", "k", "kr", "l", "m", "n", "p", "pr",
           "qu", "r", "s", "sh", "st", "t", "tr", "v", "w", "z")
_RIMES = ("a", "an", "ar", "el", "en", "er", "ex", "ia", "in", "io", "is", "ix", "o", "on", "or",
          "os", "um", "us", "y")


def _coined(rng: np.random.Generator, n: int) -> list[str]:
    """Made-up names (vendors, products, code names like ``kravion``) that no dictionary holds."""
    k = rng.integers(2, 4, size=n)
    onsets = rng.integers(0, len(_ONSETS), size=(n, 3))
    rimes = rng.integers(0, len(_RIMES), size=(n, 3))
    return [
        "".join(_ONSETS[o] + _RIMES[r] for o, r in zip(os_[:kk], rs[:kk]))
        for kk, os_, rs in zip(k.tolist(), onsets.tolist(), rimes.tolist())
    ]


def _identifiers(words: list[str], rng: np.random.Generator, n: int) -> list[str]:
    """snake_case names a notebook accumulates (``churn_rate_30d``, ``is_refund``, ``df_orders_v2``)."""
    out: list[str] = []
    a = rng.integers(0, len(words), size=n)
    b = rng.integers(0, len(words), size=n)
    shape = rng.integers(0, 5, size=n)
    extra = rng.integers(0, 1000, size=n)
    for i, j, s, e in zip(a.tolist(), b.tolist(), shape.tolist(), extra.tolist()):
        w1, w2 = words[i], words[j]
        if s == 0:
            out.append(f"{w1}_{w2}")
        elif s == 1:
            out.append(f"{w1}_{_COL_SUFFIXES[e % len(_COL_SUFFIXES)]}")
        elif s == 2:
            out.append(f"{_COL_PREFIXES[e % len(_COL_PREFIXES)]}_{w1}")
        elif s == 3:
            out.append(f"df_{w1}_v{e % 7 + 1}")
        else:
            out.append(f"{w1}_{w2}_{_COL_SUFFIXES[e % len(_COL_SUFFIXES)]}")
    return out


@functools.lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """The Zipf-ranked token list (index = rank) shared by all seeds."""
    real = _real_word_ranking()
    rng = np.random.default_rng(_VOCAB_SEED)
    content = [w for w in real[:8000] if len(w) > 2 and "'" not in w]
    room = max(0, _VOCAB_SIZE - len(real))
    generated = (
        _typos(real[200:20000], rng, room // 6)
        + _derived(real[100:12000], rng, room // 5)
        + _coined(rng, room // 8)
        + _identifiers(content, rng, room)  # fills whatever room is left
    )
    seen = set(real)
    tail = list(real[_REAL_HEAD:])
    for t in generated:
        if t not in seen and len(tail) + _REAL_HEAD < _VOCAB_SIZE:
            seen.add(t)
            tail.append(t)
    rng.shuffle(tail)  # rare real words and generated tokens share the tail
    return tuple(real[:_REAL_HEAD]) + tuple(tail)


@functools.lru_cache(maxsize=1)
def _zipf_cdf() -> np.ndarray:
    ranks = np.arange(len(vocabulary()), dtype=np.float64)
    weights = 1.0 / np.power(ranks + _ZIPF_Q, _ZIPF_S)
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


@functools.lru_cache(maxsize=1)
def _known_words() -> frozenset[str]:
    """Every alphabetic token the generator can emit, so 'absent' query words really are absent."""
    known = set(vocabulary())
    texts = list(_DS_LEXICON) + list(_DOMAIN_NOUNS) + list(_PROJECT_TOPICS) + list(_TAGS)
    texts += list(_COL_SUFFIXES) + list(_COL_PREFIXES) + list(_SCHEMAS) + list(_TABLE_KINDS)
    texts += [s for pool in _POOLS.values() for s in pool]
    texts += [s for ts in _TEMPLATES.values() for s in ts]
    for text in texts:
        known.update(re.findall(r"[a-z]+", text.lower()))
    for tok in vocabulary():
        known.update(re.findall(r"[a-z]+", tok))
    return frozenset(known)


# --------------------------------------------------------------------------
# Random streams


def _stream(rng: np.random.Generator, draw):
    """Scalar draws served from buffered blocks.

    Returns a C-level callable (``next`` on a chained iterator), because the
    generator makes ~25 draws per memory and Python-level calls would
    dominate at 1M memories.  The draw order never depends on n.
    """

    def blocks():
        while True:
            yield draw(rng, 1 << 16).tolist()

    it = itertools.chain.from_iterable(blocks())
    return functools.partial(next, it), it


class _Project:
    """Per-project pools: a project keeps reusing its own tables and columns, as real work does."""

    def __init__(self, name: str, rng: np.random.Generator, words: tuple[str, ...]) -> None:
        self.name = name
        topic = [p for p in name.split("-") if len(p) > 2]
        nouns = list(rng.choice(_DOMAIN_NOUNS, size=10, replace=False)) + topic
        # Some column stems come from the general vocabulary: real schemas are full of odd words.
        nouns += [words[i] for i in rng.integers(300, _REAL_HEAD, size=8)]
        cols = set()
        while len(cols) < 120:
            noun = nouns[rng.integers(len(nouns))]
            r = rng.random()
            if r < 0.6:
                cols.add(f"{noun}_{_COL_SUFFIXES[rng.integers(len(_COL_SUFFIXES))]}")
            elif r < 0.85:
                cols.add(f"{_COL_PREFIXES[rng.integers(len(_COL_PREFIXES))]}_{noun}")
            else:
                cols.add(f"{noun}_{nouns[rng.integers(len(nouns))]}")
        self.cols = tuple(sorted(cols))
        dfs = set()
        while len(dfs) < 25:
            noun = nouns[rng.integers(len(nouns))]
            r = rng.random()
            if r < 0.4:
                dfs.add(f"df_{noun}")
            elif r < 0.7:
                dfs.add(f"df_{noun}_v{rng.integers(2, 6)}")
            elif r < 0.85:
                dfs.add(f"{noun}s_{_POOLS['agg'][rng.integers(len(_POOLS['agg']))]}")
            else:
                dfs.add(f"{noun}_{nouns[rng.integers(len(nouns))]}_df")
        self.dfs = tuple(sorted(dfs))
        self.tables = tuple(
            f"{_SCHEMAS[rng.integers(len(_SCHEMAS))]}.{nouns[rng.integers(len(nouns))]}"
            f"_{_TABLE_KINDS[rng.integers(len(_TABLE_KINDS))]}"
            for _ in range(10)
        )
        self.files = tuple(
            f"data/{nouns[rng.integers(len(nouns))]}_{2023 + rng.integers(3)}"
            f"{rng.integers(1, 13):02d}.{_FILE_EXTS[rng.integers(len(_FILE_EXTS))]}"
            for _ in range(12)
        )
        self.tags = tuple(topic) + tuple(_TAGS[i] for i in rng.choice(len(_TAGS), size=3, replace=False))


class _Writer:
    """Fills templates; all randomness comes from three streams consumed in a fixed order."""

    def __init__(self, seed: int) -> None:
        ss = np.random.SeedSequence(seed)
        r_proj, r_u, r_z, r_n = (np.random.default_rng(s) for s in ss.spawn(4))
        self.words = vocabulary()
        cdf = _zipf_cdf()
        self.u, _ = _stream(r_u, lambda g, m: g.random(m))
        self.zipf, self.zipf_iter = _stream(r_z, lambda g, m: np.searchsorted(cdf, g.random(m)))
        self.normal, _ = _stream(r_n, lambda g, m: g.standard_normal(m))
        names = list(_PROJECT_TOPICS)
        self.projects = [_Project(name, r_proj, self.words) for name in names]
        # Project popularity is itself heavy-tailed: a few projects get most of the work.
        w = 1.0 / np.arange(1, len(self.projects) + 1) ** 0.8
        self.project_cdf = np.cumsum(w / w.sum()).tolist()
        self.type_cdf = np.cumsum(_TYPE_WEIGHTS).tolist()
        self.p: _Project = self.projects[0]
        self.slots = {
            "col": lambda: self.pick(self.p.cols),
            "df": lambda: self.pick(self.p.dfs),
            "table": lambda: self.pick(self.p.tables),
            "file": lambda: self.pick(self.p.files),
            "project": lambda: self.p.name,
            "w": lambda: self.words[self.zipf()],
            "pct": lambda: f"{min(99.9, math.exp(1.0 + 1.2 * self.normal())):.1f}%",
            "int": lambda: str(int(math.exp(5.0 + 2.0 * abs(self.normal())))),
            "n": lambda: str(2 + int(self.u() * 8)),
            "score": lambda: f"{0.55 + 0.44 * self.u():.3f}",
            "corr": lambda: f"{(2 * self.u() - 1):.2f}",
            "secs": lambda: f"{math.exp(1.5 * self.normal() + 1.0):.1f}",
            "mem": lambda: f"{math.exp(self.normal() + 0.5):.1f} GB",
            "date": self.date,
            "reason": lambda: self.fill(self.pick(_REASONS)),
        }
        for key, pool in _POOLS.items():
            if key not in self.slots:
                self.slots[key] = functools.partial(self.pick, pool)

    def pick(self, pool):
        return pool[int(self.u() * len(pool))]

    def date(self) -> str:
        d = _START + timedelta(days=int(self.u() * _SPAN_DAYS))
        return d.strftime("%Y-%m-%d")

    def fill(self, parts) -> str:
        slots = self.slots
        return "".join(slots[text]() if is_slot else text for is_slot, text in parts)

    def sentence(self, mtype: str) -> str:
        s = self.fill(self.pick(_COMPILED[mtype]))
        if s[:1].islower() and s.split(" ", 1)[0].isalpha():  # never capitalise identifiers
            s = s[0].upper() + s[1:]
        return s + "."

    def filler(self, k: int) -> str:
        body = " ".join(map(self.words.__getitem__, itertools.islice(self.zipf_iter, k)))
        return f"{self.pick(_POOLS['connector'])} {body}."

    def content(self, mtype: str) -> str:
        """One or more typed sentences plus free text, up to a log-normal length of 8-80 tokens."""
        target = min(80, max(8, round(math.exp(3.0 + 0.6 * self.normal()))))
        pieces = [self.sentence(mtype)]
        length = len(pieces[0].split())
        while length < target:
            if self.u() < 0.45 and length < target - 4:
                s = self.sentence(mtype)
            else:
                s = self.filler(max(1, min(target - length - 1, 3 + int(self.u() * 14))))
            pieces.append(s)
            length += len(s.split())
        text = " ".join(pieces)
        if length > 80:
            text = " ".join(text.split()[:80])
        return text


def generate_memories(n: int, seed: int = 0) -> Iterator[dict]:
    """Yield ``n`` memory dicts in creation order, grouped in sessions of 5-40.

    Keys: content, created_at (tz-aware UTC), session_id, tags, project, type.
    """
    wr = _Writer(seed)
    u = wr.u
    i = 0
    while i < n:
        run = 5 + int(u() * 36)
        proj_u, day_u, hour_u = u(), u(), u()
        sid = f"s{seed}-{int(u() * 16**8):08x}{i:07x}"
        wr.p = wr.projects[_bisect(wr.project_cdf, proj_u)]
        # Day follows position so any n spans about two years; the jitter keeps sessions unsorted-ish.
        day = (i / max(n, 1)) * _SPAN_DAYS + day_u * 2.0
        t = _START + timedelta(days=int(day), hours=8 + 11 * hour_u)
        for _ in range(run):
            if i >= n:
                return
            mtype = MEMORY_TYPES[_bisect(wr.type_cdf, u())]
            tags = [wr.pick(wr.p.tags) for _ in range(int(u() * 3.5))]
            yield {
                "content": wr.content(mtype),
                "created_at": t,
                "session_id": sid,
                "tags": list(dict.fromkeys(tags)),
                "project": wr.p.name,
                "type": mtype,
            }
            t += timedelta(seconds=20 + 400 * u())
            i += 1


def _bisect(cdf: list[float], x: float) -> int:
    for k, c in enumerate(cdf):
        if x < c:
            return k
    return len(cdf) - 1


# --------------------------------------------------------------------------
# Queries

_QUERY_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.@/'\-]*[a-z0-9%]|[a-z0-9]")
_SYLLABLES = tuple(c + v for c in "bdfgklmnprstvzx" for v in ("a", "e", "i", "o", "u", "y"))


def _absent_word(rng: np.random.Generator, known: frozenset[str]) -> str:
    """A pronounceable pseudo-word that the generator never emits."""
    while True:
        k = int(rng.integers(3, 5))
        w = "".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), size=k))
        if w not in known and w[:-1] not in known:
            return w


def generate_queries(
    n: int,
    seed: int = 1,
    corpus_sample: Iterable[dict | str] | None = None,
    absent_share: float = 0.15,
) -> list[str]:
    """``n`` lowercase keyword queries of 2-8 words.

    Most are drawn from memory texts of ``corpus_sample`` (default: the first
    10k memories of seed 0), either as a contiguous phrase or as scattered
    content words, so they have matches.  About ``absent_share`` contain words
    that appear nowhere in any generated corpus: half of those consist only of
    such words (a search with no answer), half mix one or two into a phrase.
    """
    if corpus_sample is None:
        corpus_sample = generate_memories(10_000, seed=0)
    texts = [m if isinstance(m, str) else m["content"] for m in corpus_sample]
    if not texts:
        raise ValueError("corpus_sample is empty")
    rng = np.random.default_rng(seed)
    known = _known_words()
    stop = _STOP_WORDS
    lengths = (2, 3, 4, 5, 6, 7, 8)
    length_p = np.array([0.16, 0.24, 0.22, 0.15, 0.1, 0.07, 0.06])
    queries: list[str] = []
    while len(queries) < n:
        k = int(rng.choice(lengths, p=length_p))
        mode = rng.random()
        if mode < absent_share / 2:
            queries.append(" ".join(_absent_word(rng, known) for _ in range(min(k, 4))))
            continue
        tokens = _QUERY_TOKEN.findall(texts[int(rng.integers(len(texts)))].lower())
        content = [t for t in tokens if t not in stop]
        if len(content) < 2:
            continue
        if rng.random() < 0.5:
            start = int(rng.integers(0, max(1, len(tokens) - k + 1)))
            words = tokens[start : start + k]
            if sum(w not in stop for w in words) == 0:
                continue
        else:
            k = min(k, len(content))
            picked = np.sort(rng.choice(len(content), size=k, replace=False))
            words = [content[i] for i in picked]
        if mode < absent_share:
            for _ in range(min(len(words) - 1, int(rng.integers(1, 3)))):
                words[int(rng.integers(len(words)))] = _absent_word(rng, known)
        queries.append(" ".join(words))
    return queries


def store_arguments(ap, questions: int) -> None:
    """--n, --questions and --db of a benchmark that asks a synthetic store (`store_at`)."""
    from pathlib import Path

    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--questions", type=int, default=questions)
    ap.add_argument("--db", type=Path, default=None, help="the store (built there when missing)")


def store_at(db, n: int, default):
    """The store at `db` (else at `default`) of `n` notes, built there first when missing."""
    from pathlib import Path

    db = Path(db or default)
    if not db.exists():
        build_store(db, n)
    return db


def build_store(path, n: int, seed: int = 0) -> None:
    """A memory file at `path` holding `n` generated notes, every vector worked out and the
    index saved beside it: what a benchmark opens again and again."""
    from slm_magic import Memory

    mem = Memory(str(path))
    mem.remember_many(list(generate_memories(n, seed=seed)))
    mem.wait_for_vectors()
    mem.replica.wait_saved()
    mem.close()


if __name__ == "__main__":  # quick look: python benchmarks/synthetic.py [n]
    import sys
    import time

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    t0 = time.perf_counter()
    vocab = vocabulary()
    t1 = time.perf_counter()
    mems = list(generate_memories(n))
    t2 = time.perf_counter()
    print(f"vocabulary {len(vocab):,} tokens in {t1 - t0:.1f}s; {n:,} memories in {t2 - t1:.1f}s")
    for m in mems[:10]:
        print(m)
    for q in generate_queries(10, corpus_sample=mems):
        print("Q:", q)

