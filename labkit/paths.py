"""Where the kit's files are: the one place that knows the checkout's folders.

The kit is installed editable from its checkout (``make lab``, ``binder/postBuild``, the hub's
runtime all run ``pip install -e``), so the notebooks, docs and build folders sit beside the
package, and its records inside it. Imports nothing, so that every layer may use it.
"""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
REPO = PACKAGE.parent
DATA = PACKAGE / "data"
NOTEBOOKS = REPO / "notebooks"
DOCS = REPO / "docs"
BUILD = REPO / "build"
