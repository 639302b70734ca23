"""ipywidgets views of slm_magic's results, installed as `slm_magic.widgets`.

The views read the engine's pydantic models and call `Memory`'s public methods; they never
touch storage. (They arrive with the widgets issue; until then results render as HTML/text.)
"""
