"""The entry script of ``xlalint --verify``'s child process: ``python .../xlalint/verify/child/__main__.py
spec.json`` (``runner.CHILD``).

It runs by its path, maybe under another interpreter than xlalint's, and must not import the packages above
it (``xlalint/__init__.py`` and ``xlalint/verify/__init__.py`` belong to the parent side and would cost the
child their imports): this package is entered in ``sys.modules`` under its own name with this directory as
its path, so that its modules import each other as they do in the parent. Its ``__init__`` holds only a
docstring, so nothing is lost by not running it.
"""

import os
import sys

PACKAGE = "xlalint.verify.child"


def _enter_package() -> None:
    here = os.path.dirname(os.path.realpath(__file__))
    package = type(sys)(PACKAGE)  # a plain module object: importlib.util is not imported for it
    package.__path__ = [here]
    package.__file__ = os.path.join(here, "__init__.py")
    package.__package__ = PACKAGE
    sys.modules[PACKAGE] = package


if __name__ == "__main__":
    if PACKAGE not in sys.modules:
        _enter_package()
    from xlalint.verify.child.main import main
    from xlalint.verify.child.process_tree import kill_tree

    code = main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    # Whatever the program started (a process in a session of its own included) ends with it: once this
    # process is gone they would be re-parented and nobody could find them any more.
    kill_tree(os.getpid(), spare=os.getpid())
    # Non-daemon threads of the user's program (loaders, loggers) must not keep the child alive.
    os._exit(code)
