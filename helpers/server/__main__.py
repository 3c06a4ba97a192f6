"""`python -m helpers.server` (`./workshop run helpers.server`): serve the embedded model on 127.0.0.1.

The model's packages are checked before anything imports them: a Python without them (the system's, say) is told
in one line which Python to use, rather than loading half the server first.
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
