"""The stages that turn the channels' scores into the memories shown: the parts a stage hands on
(`ranked.py`), the word matches and the 3-gram second stage (`fusion.py`), the meaning channel
(`meaning.py`), the learned re-ranker (`reranker.py`) and the answer's calibration
(`calibration.py`). Every formula they apply is core/scoring.py's."""
