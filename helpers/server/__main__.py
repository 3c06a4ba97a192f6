"""`python -m helpers.server`: serve the embedded model on 127.0.0.1.

The packages are checked before anything imports them, so that a Python without them (the system's, say) is told
which one to use instead of showing an import's traceback.
"""
import sys

from helpers.runtime.embedded import SETTING_EXIT, MissingDependency, check_embedded_dependencies

try:
    check_embedded_dependencies()
except MissingDependency as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(SETTING_EXIT)

from helpers.server.app import main  # noqa: E402  (only once the packages are known to be there)

main()
