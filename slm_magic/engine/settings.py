"""What every part of a `Memory` reads at call time: the ranking's knobs and the meaning
channel's model (or why it did not load). One holder, so that a change made on the facade
(`mem.config = ...`, `mem.meaning = None`, as tests and benchmarks do) reaches every part."""

from __future__ import annotations

import os

from ..core.scoring import RankingConfig
from ..errors import InvalidInput, type_name
from ..index.meaning import DEFAULT_MODEL, EmbeddingModel, load_model


class Settings:
    def __init__(self, config: RankingConfig, *, semantic: bool, embedding_model: str | os.PathLike[str] | None):
        if not isinstance(semantic, bool):
            raise InvalidInput(f"semantic must be True or False, not {type_name(semantic)}")
        if embedding_model is not None and not isinstance(embedding_model, (str, os.PathLike)):
            raise InvalidInput(f"embedding_model must be a name or a path, not {type_name(embedding_model)}")
        self.config = config
        self.semantic = semantic
        self.model_name = str(embedding_model) if embedding_model else DEFAULT_MODEL
        # The meaning channel's model, loaded once per process; when it cannot load, recall runs
        # on the words alone and says so (degraded_mode, meaning_error).
        self.model: EmbeddingModel | None = None
        self.model_error: str | None = None
        if semantic:
            try:
                self.model = load_model(self.model_name)
            except (ValueError, OSError) as exc:
                self.model_error = f"the meaning channel's model did not load: {exc}"
