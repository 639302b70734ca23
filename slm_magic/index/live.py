"""The kernel's index of the store, kept live: the replica (postings, 3-grams, vectors and the
rows they show), caught up with other processes' writes, or, when it failed, why there is none
(recall then runs from the file, and says so). A part of `Memory`, held as `memory.live`."""

from __future__ import annotations

from ..core.identity import default_user
from ..storage.store import STORAGE_FAILURES
from .fill import VectorFill
from .meaning import EmbeddingModel
from .replica import IndexReplica
from .rows import FactRows
from .sparse import SparseIndex


class LiveIndex:
    def __init__(self, store):
        self.store = store
        self.replica: IndexReplica | None = None
        self.error: str | None = None     # why there is no replica (None while there is one)
        self._no_rows = FactRows()        # (what `rows` is while degraded: empty)
        self.fill = VectorFill(store, self)  # the vectors a bulk write left to follow it

    @property
    def index(self) -> SparseIndex | None:
        """The replica's sparse index; None when recall runs from SQL (degraded)."""
        return None if self.replica is None else self.replica.index

    @property
    def rows(self) -> FactRows:
        return self._no_rows if self.replica is None else self.replica.rows

    def load(self, k1: float, b: float, model: EmbeddingModel | None) -> None:
        """Build the replica from the file (or map the saved index). On failure recall falls
        back to SQL, and says so."""
        try:
            self.replica = IndexReplica.load(self.store, k1, b, model)
            self.error = None
            self._adopt_unowned()
            self.save_soon()
            self.fill.start()
        except STORAGE_FAILURES as exc:  # the file or the machine failed us: answer from SQL instead
            self.degrade(f"in-process index unavailable ({type(exc).__name__}: {exc})")

    def degrade(self, why: str) -> None:
        self.replica, self.error = None, why

    def refresh(self) -> None:
        """Catch up with writes another connection or process made since we last looked (and
        build the index again when the saved one it mapped turned out damaged)."""
        if self.replica is not None and self.replica.damaged:
            replica, self.replica = self.replica, None  # (a fill under way sees it go, and stops)
            self.load(replica.index.k1, replica.index.b, replica.embedder)
            if self.replica is not None:
                self.replica.source = f"rebuilt ({replica.damaged})"
        if self.replica is not None:
            self.replica.refresh()
            self._adopt_unowned()
            self.fill.start()

    def sync(self) -> None:
        """Catch up after our own change the replica cannot apply by itself (a revision, a forget)."""
        if self.replica is not None:
            self.replica.sync()
            self._adopt_unowned()
            self.fill.start()

    def start_checks(self) -> None:
        """The saved index's late checks, once a call has been answered (cheap to ask)."""
        if self.replica is not None:
            self.replica.start_checks()

    def after_write(self, *args, **kwargs) -> None:
        """Our own write into the replica (the write itself is safe in the file already)."""
        if self.replica is None:
            return
        try:
            self.replica.after_write(*args, **kwargs)
        except STORAGE_FAILURES as exc:
            self.degrade(f"in-process index failed while adding ({type(exc).__name__}: {exc})")
            return
        self.fill.start()

    def save_soon(self) -> None:
        """A background save when enough changed since the saved index (cheap to ask)."""
        if self.replica is not None and self.replica.worth_saving():
            self.replica.save(background=True)

    def save_last(self) -> None:
        """When the file is let go of for good: a background save waited for, and one more if
        enough changed since (the next kernel maps the index instead of rebuilding it)."""
        if self.replica is not None:
            self.replica.wait_saved()
            if self.replica.worth_saving():
                self.replica.save()

    def drop_saved(self) -> None:
        """After memories went: the saved index holds their text, so it goes too."""
        if self.replica is not None and self.store.index_stem is not None:
            self.replica.drop_saved()

    def _adopt_unowned(self) -> None:
        """Rows of the empty user that the index just took in (a kernel of an older slm_magic,
        started before the file was upgraded, wrote them): the default user's, as the upgrade
        made the older ones (migrations._v7, store.adopt_unowned), and taken in again. Nothing is
        asked of the file when there are none (the usual case): the index saw their user."""
        replica = self.replica
        if replica is None or not replica.unowned:
            return
        replica.unowned = False
        if self.store.login_user is None:  # (a file: on a server, every row is its role's)
            self.store.adopt_unowned(default_user())
            replica.sync()
