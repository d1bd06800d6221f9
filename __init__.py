"""Not part of the rlzoo package: Python imports this file as ``rlzoo`` only when it runs from
the folder that holds this repository cloned as ``rlzoo`` (``~/src`` holding ``~/src/rlzoo/``).
There the clone is found before the installed package, and without this file ``import rlzoo``
gives an empty namespace package (``AttributeError: module 'rlzoo' has no attribute
'load_policy'``). This file names the folder in one line on stderr, as ``python -m rlzoo.train``
does, and loads the package inside it (``<clone>/rlzoo``), so the import still works
(docs/extending.md, "The import trap"). Imported under any other name, it does nothing.
"""

import os as _os
import sys as _sys

_clone = _os.path.dirname(_os.path.abspath(__file__))
_inner = _os.path.join(_clone, "rlzoo", "__init__.py")
if __name__ == "rlzoo" and _os.path.isfile(_inner):
    _sys.stderr.write(
        f"rlzoo: warning: 'rlzoo' is the folder {_clone} here (a clone), not the installed "
        f"package; the package inside it, {_os.path.dirname(_inner)}, is used; run from another "
        'folder to use the installed one (docs/extending.md, "The import trap")\n')
    __path__ = [_os.path.dirname(_inner)]
    __file__ = _inner
    with open(_inner, encoding="utf-8") as _source:
        exec(compile(_source.read(), _inner, "exec"))  # noqa: S102 - the package's own code
