"""The text a saved notebook shows where widgets cannot render (GitHub, nbconvert, a kernel
without the widget manager): the view's whole text table, not ipywidgets' 110-character cut."""

from __future__ import annotations


class PlainTextFallback:
    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        if data is not None:
            data["text/plain"] = repr(self)
        return data
