"""What a saved notebook shows where the live view cannot: its kernel shut down (JupyterLab's
widget renderer then writes "Error displaying widget: model not found"), nbviewer and
`jupyter nbconvert` (which drop a widget view without saved widget state), GitHub (which
renders only text/html and text/plain), an untrusted notebook (widgets are not safe to render).

A view is shown as two outputs: first its saved form, the result's whole HTML and text table,
then the live widget, whose own text is empty. CSS decides which of the two is seen:
the saved form hides itself when the next output holds a live view, and hides that output
when it holds none (the renderer's error text, "Loading widget...", its empty text). Where
`<style>` is stripped (GitHub, an untrusted notebook) the widget's output shows its text,
which is empty: the saved form reads alone.
"""

from __future__ import annotations

# JupyterLab and nbconvert's lab template wrap each output in .jp-OutputArea-child; the
# classic notebook and nbconvert's classic template in .output_area.
_AREAS = (".jp-OutputArea-child", ".output_area")
SAVED_CSS = "<style>" + "".join(
    f"{a}:has(.slm-static):has(+ {a} .slm-live){{display:none}}"
    f"{a}:has(.slm-static) + {a}:not(:has(.slm-live)){{display:none}}" for a in _AREAS) + "</style>"
LIVE_TEXT = ""  # the widget output's text/plain: nothing to read twice


def saved_bundle(page: str, text: str) -> dict[str, str]:
    """The saved form's outputs: `page` (the result's HTML) marked as static, and `text`."""
    return {"text/html": f"{SAVED_CSS}<div class='slm-static'>{page}</div>", "text/plain": text}


class SavedForm:
    """Mixed into a view (before its ipywidgets class): `saved_html()` and `__repr__` give the
    saved form, which is shown above the live view and updated by `resave()` when the view's
    contents change (a search typed, a memory pinned)."""

    _saved = None  # the display handle of the saved form, once shown

    def saved_html(self) -> str:  # pragma: no cover (each view has its own)
        raise NotImplementedError

    def saved_bundle(self) -> dict[str, str]:
        return saved_bundle(self.saved_html(), repr(self))

    def _ipython_display_(self) -> None:
        from IPython.display import display

        self.add_class("slm-live")
        self._saved = display(self.saved_bundle(), raw=True, display_id=True)
        display(self._repr_mimebundle_(), raw=True)

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs)
        if data is not None:  # (not ipywidgets' repr cut at 110 characters: the table is above)
            data["text/plain"] = LIVE_TEXT
        return data

    def resave(self) -> None:
        """Show the view's present contents in its saved form (what a saved notebook keeps)."""
        if self._saved is not None:
            self._saved.update(self.saved_bundle(), raw=True)
