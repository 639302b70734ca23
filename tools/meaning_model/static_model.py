"""The package's own model code (slm_magic/index/meaning.py: the WordPiece and the static table), for
the build scripts: loaded by path, since the build venv has no slm_magic installed and the
package's __init__ would want its runtime dependencies. One tokenizer and one encoder, the ones
the product runs, are what the build checks and measures."""
import importlib.util
import pathlib

_path = pathlib.Path(__file__).resolve().parents[2] / "slm_magic" / "index" / "meaning.py"
_spec = importlib.util.spec_from_file_location("slm_magic_meaning", _path)
_meaning = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_meaning)

StaticModel = _meaning.StaticModel
WordPiece = _meaning.WordPiece
