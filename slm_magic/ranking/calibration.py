"""Answer calibration: the probability that a recall answered its query, from the ranking's
evidence (its top relevance), fitted on outcomes a judge gave or the user fed in.

With no calibration (no judge, or too few outcomes), `calibration_status` is "uncalibrated",
`answer_confidence` is None and a recall abstains only when no memory reaches the relevance
floor. With at least 30 outcomes of both kinds a Platt scaling (a logistic regression on the
evidence) is fitted, and from 200 an isotonic regression; `answer_confidence` is then its
probability and a recall abstains below `abstain_below` (0.5 unless set). Refitted when the
outcomes have grown by a quarter. Stored as JSON numbers beside the ranker.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import InvalidInput

if TYPE_CHECKING:  # pragma: no cover
    from ..results.models import RecallResult, ScoredMemory

MIN_OUTCOMES, ISOTONIC_FROM = 30, 200
REFIT_GROWTH = 1.25
RELEVANCE_FLOOR = 0.05  # with no calibration: below this nothing "answers"

#: A judge: given a query and the memories a recall showed, did they answer it?
Judge = Callable[[str, Sequence["ScoredMemory"]], bool]


class AnswerConfidence(BaseModel):
    """Whether a recall answered its query, as far as the memory can tell."""

    model_config = ConfigDict(frozen=True)

    calibration_status: str             # "uncalibrated" or "calibrated"
    calibration_id: str | None
    answer_confidence: float | None     # a probability when calibrated
    abstained: bool
    abstention_reason: str | None


def evidence(result: "RecallResult") -> float:
    """What the calibration reads of a recall: its best relevance (0 when nothing came)."""
    return max((m.relevance for m in result.memories), default=0.0)


@dataclass
class Calibration:
    kind: str                 # "platt" or "isotonic"
    a: float = 0.0            # platt: p = sigmoid(a·evidence + b)
    b: float = 0.0
    xs: tuple = ()            # isotonic: the fitted step function's knots
    ys: tuple = ()

    def probability(self, x: float) -> float:
        if self.kind == "platt":
            return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, self.a * x + self.b))))
        return float(np.interp(x, self.xs, self.ys))

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray) -> "Calibration":
        y = np.asarray(y, dtype=bool)
        if y.all() or not y.any():
            raise ValueError("all outcomes agree: nothing to calibrate against yet")
        if x.size >= ISOTONIC_FROM:
            from sklearn.isotonic import IsotonicRegression

            iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(x, y.astype(float))
            return cls("isotonic", xs=tuple(map(float, iso.X_thresholds_)), ys=tuple(map(float, iso.y_thresholds_)))
        from sklearn.linear_model import LogisticRegression

        lr = LogisticRegression(C=100.0).fit(x.reshape(-1, 1), y)
        return cls("platt", a=float(lr.coef_[0][0]), b=float(lr.intercept_[0]))

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "a": self.a, "b": self.b, "xs": list(self.xs), "ys": list(self.ys)})

    @classmethod
    def from_json(cls, text: str) -> "Calibration":
        try:
            d = json.loads(text)
            out = cls(str(d["kind"]), float(d["a"]), float(d["b"]), tuple(map(float, d["xs"])),
                      tuple(map(float, d["ys"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"unreadable calibration ({exc})") from None
        if out.kind not in ("platt", "isotonic") or (out.kind == "isotonic" and (not out.xs or len(out.xs) != len(out.ys))):
            raise ValueError("malformed calibration")
        return out


class AnswerCalibration:
    """A part of `Memory`: one user's outcomes, the calibration fitted on them (parsed once per
    model), the judge that produces outcomes, and a recall's answer confidence."""

    def __init__(self, store, user: str, now: Callable[[], object], *, judge: Judge | None = None,
                 abstain_below: float = 0.5):
        if not isinstance(abstain_below, (int, float)) or not 0 <= abstain_below <= 1:
            raise InvalidInput(f"abstain_below must be a probability in [0, 1]; got {abstain_below!r}")
        self.store, self._user, self._now = store, user, now
        self.abstain_below = float(abstain_below)
        self.judge: Judge | None = None
        self._parsed: dict[str, Calibration] = {}  # calibration model id -> its parsed calibration
        self.set_judge(judge)

    def set_judge(self, judge: Judge | None) -> None:
        """A callable (query, memories) -> bool that says whether a recall answered; each
        session opened with a query is then judged, and the outcomes fit the calibration."""
        if judge is not None and not callable(judge):
            raise InvalidInput("judge must be a callable (query, memories) -> bool, or None")
        self.judge = judge

    def record(self, query: str, result: "RecallResult", answered: bool, *, source: str = "label") -> None:
        """Feed one labelled outcome: did `result` (a recall of `query`) answer it?"""
        from ..results.models import RecallResult

        if not isinstance(query, str) or not isinstance(answered, (bool, np.bool_)) or not isinstance(
                result, RecallResult):
            raise InvalidInput("record_outcome needs a query string, a RecallResult and answered as a bool")
        self._add(query, result, bool(answered), source)

    def confidence(self, result: "RecallResult") -> AnswerConfidence:
        """Did this recall answer its query? Calibrated when enough outcomes are known."""
        from ..results.models import RecallResult

        if not isinstance(result, RecallResult):
            raise InvalidInput(f"answer_confidence needs a RecallResult, not {type(result).__name__}")
        cal, cal_id = self._calibration()
        top = evidence(result)
        if cal is None:
            answered = top >= RELEVANCE_FLOOR
            return AnswerConfidence(
                calibration_status="uncalibrated", calibration_id=None, answer_confidence=None,
                abstained=not answered,
                abstention_reason=None if answered else (
                    "no stored memory is relevant to the query" if not result.memories
                    else f"no memory reaches relevance {RELEVANCE_FLOOR}"))
        p = cal.probability(top)
        return AnswerConfidence(
            calibration_status="calibrated", calibration_id=cal_id, answer_confidence=p,
            abstained=p < self.abstain_below,
            abstention_reason=(f"answer confidence {p:.2f} is below {self.abstain_below:.2f}"
                               if p < self.abstain_below else None))

    def judge_recall(self, query: str, result: "RecallResult") -> None:
        """Ask the judge (if any) about one recall, and keep its answer as an outcome."""
        if self.judge is None or not query:
            return
        try:
            answered = bool(self.judge(query, result.memories))
        except Exception:  # noqa: BLE001 - a user's judge failing must not break a session: no outcome
            return
        self._add(query, result, answered, "judge")

    def _add(self, query: str, result: "RecallResult", answered: bool, source: str) -> None:
        self.store.signals.add_outcome(uuid.uuid4().hex[:16], self._user, query, evidence(result), answered, source,
                               self._now())
        self._maybe_refit()

    def _calibration(self) -> tuple[Calibration | None, str | None]:
        """The user's newest calibration (parsed once per model) and its id, or (None, None)."""
        row = self.store.signals.latest_model(self._user, "calibration")
        if row is None:
            return None, None
        cal = self._parsed.get(row[0])
        if cal is None:
            try:
                cal = Calibration.from_json(row[3])
            except ValueError:
                return None, None
            self._parsed = {row[0]: cal}  # only the newest is ever used
        return cal, row[0]

    def _maybe_refit(self) -> None:
        user = self._user
        n = self.store.signals.outcome_count(user)
        if n < MIN_OUTCOMES:
            return
        row = self.store.signals.latest_model(user, "calibration")
        if row is not None and n < REFIT_GROWTH * row[2]:
            return
        rows = self.store.signals.outcomes(user)
        x = np.array([r[0] for r in rows], dtype=np.float64)
        y = np.array([r[1] for r in rows], dtype=bool)
        try:
            cal = Calibration.fit(x, y)
        except ValueError:
            return  # all outcomes agree so far: stay uncalibrated
        version = 1 if row is None else row[1] + 1
        self.store.signals.save_model(f"cal-v{version}-{uuid.uuid4().hex[:8]}", user, "calibration", version,
                              self._now(), len(rows), cal.to_json())
