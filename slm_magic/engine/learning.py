"""Feedback signals and the learning phases they unlock.

Signals are stored per session and per memory, with the query and the rank the memory was
shown at. Explicit: `feedback(fact_id, "up" | "down")` (the magic and the widgets' buttons).
Implicit, from what the user does with a memory a recall showed in a real session (synthetic
`http:` / `mcp:` / `cli:` / `probe:` sessions record no showings, so they give none):

- pinned after being shown: useful (+1);
- revised after being shown: useful (+0.5);
- used by a `remember` of the same session (the new memory contains at least half of its
  indexed words, counted with repeats): useful (+0.5);
- shown three times or more in a session that gave it no positive signal, when the session
  closes: a weak negative (-0.25).

Phases, by the user's number of signals: 1 (< 50) the default fusion; 2 (50-199) a bounded
per-memory usefulness prior, `learned = 0.10 · tanh(sum of its signals / 2)`; 3 (>= 200) a
logistic regression on the signals (see `ranking/reranker.py`) re-ranks the top 50. The model is
retrained when the signals have grown by a quarter (and at least 50) since it was fitted; if
it cannot be fitted or loaded, phase 2 ranks and the status says why.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta

import numpy as np

from ..errors import InvalidInput
from ..results.models import PHASE_2_SIGNALS, PHASE_3_SIGNALS, LearningStatus
from ..index.rows import fact_of
from ..index.sparse import locate
from ..ranking.learner import Learner
from ..ranking.reranker import CANDIDATES, LinearRanker, Usage, feature_matrix, held_out_orders

#: Explicit signals and their value: +1 useful, -1 not useful.
EXPLICIT_SIGNALS = {"up": 1.0, "down": -1.0}
#: Implicit signals (see the module docstring) and their value.
IMPLICIT_SIGNALS = {"pinned": 1.0, "revised": 0.5, "used": 0.5, "ignored": -0.25}
LEARNED_WEIGHT = 1.0      # scales the phase-3 model's part (see ranking/reranker.py)
RETRAIN_GROWTH, RETRAIN_MIN_NEW = 1.25, 50
USED_OVERLAP = 0.5        # share of a shown memory's terms a new memory must contain to "use" it
IGNORED_AFTER = 3         # showings in one session with no positive signal: a weak negative


class LearningLoop:
    """A part of `Memory` (held as `memory.learning`): explicit feedback, the implicit signals,
    the phases, and each user's learned ranker, parsed once per model. It owns the rankers it
    parsed and why a training failed; it reads the signals through the store, what sessions
    showed through the working sets and the index, and trains on recall's default fusion."""

    def __init__(self, store, settings, live, working_sets, clock: Callable[[], datetime], user_id: str,
                 session_timeout_hours: float):
        self.store = store
        self.settings = settings
        self.live = live
        self.working_sets = working_sets
        self.now = clock
        self.user_id = user_id
        self.session_timeout_hours = session_timeout_hours
        # The default fusion's best candidates for a query (`Recall.candidates`): what a learned
        # ranker is trained on. Given once recall is built (it ranks with this loop's learners).
        self.candidates: Callable[..., tuple] | None = None
        self._rankers: dict[str, tuple] = {}          # user -> the newest fit, read (`_stored`)
        self._training_errors: dict[str, tuple] = {}  # user -> (why the last training failed, at how many signals)

    def feedback(self, fact_id: str, signal: str, *, session_id: str | None = None,
                 query: str | None = None, rank: int | None = None, project: str | None = None) -> str:
        """Record that a memory was useful ("up") or not ("down") for `query` (recalled with
        the `project` filter, if any); returns the signal's id. In a session, one judgement per
        memory and question: the same again (a button clicked twice, a cell run again) counts
        once, the other one replaces it."""
        if not isinstance(signal, str) or signal not in EXPLICIT_SIGNALS:
            raise InvalidInput(f"signal must be one of {', '.join(EXPLICIT_SIGNALS)}; got {signal!r}")
        fact = self._readable(fact_id) if isinstance(fact_id, str) else None
        if fact is None:  # (one the user may read: their own, or one someone shared)
            raise InvalidInput(f"no memory with id {fact_id!r}")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
            raise InvalidInput(f"rank must be a positive integer; got {rank!r}")
        for name, value in (("session_id", session_id), ("query", query), ("project", project)):
            if value is not None and not isinstance(value, str):
                raise InvalidInput(f"{name} must be a string, not {type(value).__name__}")
        if query is None and session_id:  # from a magic: the query the session last showed it for
            shown = self.last_showing(fact_id)
            if shown is not None and shown[0] == session_id:
                query, rank, project = shown[1], rank or shown[2], project if project is not None else shown[3]
        signals = self.store.signals
        earlier = signals.judgements(session_id, self.user_id, fact_id, query, project, EXPLICIT_SIGNALS) \
            if session_id else []
        if earlier and all(s == signal for _, s in earlier):
            return earlier[0][0]
        signals.drop_signals([i for i, _ in earlier])  # (a mind changed)
        signal_id = uuid.uuid4().hex[:16]
        signals.add_feedback([(signal_id, session_id, fact_id, signal, EXPLICIT_SIGNALS[signal], query, rank,
                                  self.now(), self.user_id, project)])
        self._maybe_retrain(self.user_id)
        return signal_id

    def _readable(self, fact_id: str):
        """A memory this user may read (their own, or one its author shared), else None."""
        row = self.store.readable_fact(fact_id, self.user_id)
        return None if row is None else fact_of(row)

    def feedback_count(self, user_id: str | None = None) -> int:
        return self.store.signals.feedback_count(self.user_id if user_id is None else user_id)

    # --- implicit signals ------------------------------------------------------------------
    def last_showing(self, fact_id: str):
        """(session_id, query, rank, project) of the latest recall that showed a memory within
        the session timeout (showings not yet written out included), or None."""
        self.working_sets.flush()
        since = self.now() - timedelta(hours=self.session_timeout_hours)
        return self.store.sessions.last_showing(fact_id, since)

    def after_showing(self, fact_id: str, signal: str, user_id: str) -> None:
        """Pinned or revised: a signal if a real session's recall showed it lately."""
        shown = self.last_showing(fact_id)
        if shown is None:
            return
        session_id, query, rank, project = shown
        if (fact_id, signal) in set(self.store.signals.session_signals(session_id, user_id)):
            return
        self.store.signals.add_feedback([(uuid.uuid4().hex[:16], session_id, fact_id, signal, IMPLICIT_SIGNALS[signal],
                                  query, rank, self.now(), user_id, project)])
        self._maybe_retrain(user_id)

    def implicit_used(self, session_id: str | None, new_terms: list[int], new_doc: int,
                       user_id: str) -> None:
        """A remember in a session that showed memories: the shown ones it repeats were used.
        Found in process from the index's postings; the file is asked only when one was."""
        shown_counts = self.working_sets.known(session_id) if session_id else None
        index = self.live.index
        if not shown_counts or index is None:
            return
        shown = np.array(sorted(d for d in shown_counts if d != new_doc and 0 <= d < index.docs.size), dtype=np.int64)
        if shown.size:  # live memories of this user only (a session id is any string)
            shown = shown[index.docs.alive[shown] & (index.docs.user[shown] == index.lookup_code("user", user_id))]
        if not shown.size:
            return
        # How many of each shown memory's words the new one has, each word once: a posting's tf
        # also counts the word's weight in the shown memory's tags and project, which a note
        # filed under the same project shares without using the memory.
        covered = np.zeros(shown.size)
        for term in set(new_terms):
            col = index.cols.get(term)
            if col is None:
                continue
            docs, _ = index.postings(col)
            np.add.at(covered, locate(shown, docs)[0], 1.0)
        used = shown[covered >= USED_OVERLAP * np.maximum(index.docs.dl[shown], 1.0)]
        if not used.size:
            return
        self.working_sets.flush()
        given = {f for f, s in self.store.signals.session_signals(session_id, user_id) if s == "used"}
        rows = [(uuid.uuid4().hex[:16], session_id, fact_id, "used", IMPLICIT_SIGNALS["used"], query, rank,
                 self.now(), user_id, project)
                for fact_id, _, query, rank, project in self.store.sessions.session_showings(
                    session_id, user_id, used.tolist())
                if fact_id not in given]
        if rows:
            self.store.signals.add_feedback(rows)
            self._maybe_retrain(user_id)

    def ignored_at_close(self, session_id: str, user_id: str) -> None:
        """At a session's close: what it was shown often and never judged (a thumb down says
        more than "ignored", and is not said twice)."""
        self.working_sets.flush()
        signals = self.store.signals.session_signals(session_id, user_id)
        positive = {f for f, s in signals if EXPLICIT_SIGNALS.get(s, IMPLICIT_SIGNALS.get(s, 0)) > 0}
        already = {f for f, s in signals if s == "ignored" or s in EXPLICIT_SIGNALS}
        rows = [(uuid.uuid4().hex[:16], session_id, fact_id, "ignored", IMPLICIT_SIGNALS["ignored"], query, rank,
                 self.now(), user_id, project)
                for fact_id, times, query, rank, project in self.store.sessions.session_showings(session_id, user_id)
                if times >= IGNORED_AFTER and fact_id not in positive and fact_id not in already]
        if rows:
            self.store.signals.add_feedback(rows)
            self._maybe_retrain(user_id)

    # --- phases and the learner --------------------------------------------------------------
    def status(self, user_id: str | None = None) -> LearningStatus:
        user = self.user_id if user_id is None else user_id
        signals = self.store.signals.feedback_count(user)
        phase = 1 if signals < PHASE_2_SIGNALS else 2 if signals < PHASE_3_SIGNALS else 3
        if not self.settings.config.learning:  # (signals are still kept: turned on again, they count)
            return LearningStatus(feedback_signals=signals, phase=phase, status="off (learning=False)", ranking="off")
        if phase == 1:
            return LearningStatus(feedback_signals=signals, phase=phase, status="collecting")
        if phase == 2:
            return LearningStatus(feedback_signals=signals, phase=phase, status="active learning",
                                  ranking="usefulness prior")
        ranker, model_id, why = self._ranker(user)
        if ranker is None:
            return LearningStatus(feedback_signals=signals, phase=3, status=f"phase 2 ranking used: {why}",
                                  ranking="usefulness prior")
        return LearningStatus(feedback_signals=signals, phase=3, status="learned ranking", ranking="learned model",
                              model_id=model_id)

    def learner(self, user_id: str) -> Learner | None:
        """The learning to apply to this user's recalls (None in phase 1 or when switched off)."""
        if not self.settings.config.learning:
            return None
        signals = self.store.signals.feedback_count(user_id)
        if signals < PHASE_2_SIGNALS:
            return None
        ranker = self._ranker(user_id)[0] if signals >= PHASE_3_SIGNALS else None
        usage = Usage(*self.store.signals.signal_sums(user_id))
        return Learner(3 if ranker is not None else 2, usage, ranker, self.live.rows)

    def _ranker(self, user_id: str) -> tuple[LinearRanker | None, str | None, str | None]:
        """(the stored model, its id, None) or (None, None, why there is none)."""
        ranker, model_id, why, _ = self._stored(user_id)
        return ranker, model_id if ranker is not None else None, why

    def _stored(self, user_id: str) -> tuple[LinearRanker | None, str | None, str | None, bool]:
        """The newest stored fit, read once per model (a recall asks for it): (its model or None,
        its id, why there is no model, whether this version reads it: a model, or a fit that
        `train`'s check rejected)."""
        why = self._training_errors.get(user_id, (None, 0))[0]
        row = self.store.signals.latest_model(user_id, "ranker")
        if row is None:
            return None, None, why or "no model trained yet", False
        model_id, _, _, params = row
        cached = self._rankers.get(user_id)
        if cached is None or cached[0] != model_id:
            rejected = _rejection(params)
            try:
                cached = (model_id, None, rejected, True) if rejected is not None else \
                    (model_id, LinearRanker.from_json(params), None, True)
            except ValueError as exc:
                cached = (model_id, None, f"model {model_id} could not be loaded: {exc}", False)
            self._rankers[user_id] = cached  # one parsed fit per user: the newest
        return cached[1], cached[0], cached[2], cached[3]

    def _maybe_retrain(self, user_id: str) -> None:
        """Fit a new ranker when the signals reach phase 3 or have grown enough since the last."""
        if not self.settings.config.learning:
            return
        signals = self.store.signals.feedback_count(user_id)
        if signals < PHASE_3_SIGNALS:
            return
        row = self.store.signals.latest_model(user_id, "ranker")
        # (a model this version cannot read is refitted now; a rejected fit, as any, when signals grew)
        if (row is not None and signals < max(row[2] + RETRAIN_MIN_NEW, RETRAIN_GROWTH * row[2])
                and self._stored(user_id)[3]):
            return
        failed_at = self._training_errors.get(user_id, (None, 0))[1]
        if failed_at and signals < failed_at + RETRAIN_MIN_NEW:
            return  # the last attempt failed: wait for enough new signals before trying again
        self.train(user_id)

    def train(self, user_id: str | None = None) -> str | None:
        """Fit the phase-3 ranker on a user's signals now and store it; returns its id, or None
        (the reason is then in `status().status`)."""
        user = self.user_id if user_id is None else user_id
        signals = self.store.signals.feedback_count(user)
        try:
            X, y, asked = self._training_rows(user)
            check = held_out_orders(X, y, asked, weight=LEARNED_WEIGHT)
            ranker = LinearRanker.fit(X, y, weight=LEARNED_WEIGHT)
        except Exception as exc:  # noqa: BLE001 - the ranking falls back to phase 2 and says why
            self._training_errors[user] = (f"training failed: {exc}", signals)
            return None
        self._training_errors.pop(user, None)
        adopted = check is None or check[0] >= check[1]
        params = ranker.to_json()
        if not adopted:
            # (stored as the newest model, so no kernel goes on with an older one: the same
            # feedback would not have it either; refitted as the signals grow, as any model)
            params = json.dumps({"rejected": f"a learned ranking ordered your own feedback, asked of questions it "
                                             f"was not fitted on, worse than the default ({check[0]:.2f} of the "
                                             f"pairs against {check[1]:.2f})"})
        row = self.store.signals.latest_model(user, "ranker")
        version = 1 if row is None else row[1] + 1
        model_id = f"ranker-v{version}"
        # trained_on: the user's signal count when fitted (what the retraining rule compares)
        self.store.signals.save_model(f"{model_id}-{uuid.uuid4().hex[:8]}", user, "ranker", version,
                                      self.now(), signals, params)
        return self.store.signals.latest_model(user, "ranker")[0] if adopted else None

    def _training_rows(self, user: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each signal with a query becomes a row: the features its memory has among that
        query's default candidates now (its own query's signals left out of the prior), its
        label, and which question it was given for."""
        if self.live.index is None:
            raise RuntimeError("the in-process index is not available")
        by_query: dict[tuple, list[tuple[int, float]]] = defaultdict(list)
        for query, project, doc, value in self.store.signals.training_signals(user):
            by_query[(query, project)].append((int(doc), float(value)))
        usage = Usage(*self.store.signals.signal_sums(user))
        X, y, asked = [], [], []
        for number, ((query, project), items) in enumerate(by_query.items()):
            ranked, cs = self.candidates(query, user, CANDIDATES, project)
            if not ranked.doc_ids.size:
                continue
            sums, shown = usage.lookup(ranked.doc_ids)
            own = defaultdict(float)
            for doc, value in items:
                own[doc] += value
            sums = sums - np.array([own.get(int(d), 0.0) for d in ranked.doc_ids])
            feats = feature_matrix(ranked, cs, self.live.index, sums, shown, self.live.rows)
            row_of = {int(d): i for i, d in enumerate(ranked.doc_ids)}
            for doc, value in items:
                if doc in row_of:
                    X.append(feats[row_of[doc]])
                    y.append(value > 0)
                    asked.append(number)
        if not X:
            raise ValueError("no signal's memory is among its query's candidates")
        return np.array(X), np.array(y), np.array(asked)


def _rejection(params: str) -> str | None:
    """Why the newest fit was not adopted (`train`'s check), or None for a model."""
    try:
        got = json.loads(params)
    except ValueError:
        return None
    return got.get("rejected") if isinstance(got, dict) and isinstance(got.get("rejected"), str) else None

