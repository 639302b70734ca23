"""What the engine answers with: the result models (pydantic, with their text and HTML) and
how they are written out for a terminal, a saved notebook and the widgets."""
