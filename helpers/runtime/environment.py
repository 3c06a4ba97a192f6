"""What the setup cell of every notebook calls, and the pre-class check: `python -m helpers.runtime.environment --check`.

`prepare()` installs what is missing and connects to the chosen backend. `check()` does the same,
then runs the dialect probe of `helpers.runtime.probes` (one implementation for both): its request in
the active dialect is the guided round-trip, timed. It answers, before class, "will the guided
cells work here?".
"""
from __future__ import annotations

import argparse
import sys

from helpers.runtime.backends import choose_backend, connect
from helpers.runtime.install import install_embedded
from helpers.runtime.embedded import missing_embedded_packages, stop_own_server
from helpers.runtime.probes import probe
from helpers.runtime.profiles import Connection, dialect_by_setting
from helpers.runtime.settings import BackendError


COLAB_NOTE = ("This Colab runtime is new (every badge opens one), so the embedded model is installed into it "
              "first: a few minutes.\nFor a class, a free NVIDIA API Catalog key (build.nvidia.com; NVIDIA_API_KEY "
              "in Colab's Secrets panel) needs no install at all: set it, restart the runtime, run this cell again.")


def prepare(show: bool = True) -> Connection:
    """Make the chosen backend usable and return its `Connection`; a key set means nothing is compiled."""
    if choose_backend() == "embedded" and (missing := missing_embedded_packages()):
        if "google.colab" in sys.modules:
            print(COLAB_NOTE, flush=True)
        install_embedded(missing)
    connection = connect()
    if show:
        print(connection.describe())
    return connection


def check() -> bool:
    """Print the backend, the dialect, the probe and one guided round-trip with its latency; True when it works."""
    connection = prepare()
    print()
    result = probe(connection)
    round_trip = result.check(connection.profile.dialect)
    print()
    if round_trip is None:
        print("guided round-trip: none, the active dialect is prompt_only")
    else:
        print(f"guided round-trip in {round_trip.dialect}: {round_trip.verdict}, {round_trip.seconds:.2f} s")
    ready = round_trip is not None and round_trip.verdict == "enforced"
    fix = result.fix(connection.profile.dialect, dialect_by_setting(connection.profile))
    print("ready: the guided cells will be guided" if ready else
          f"NOT READY: the guided cells will not be guided here. Fix: {fix}, then run this check again")
    return ready


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.runtime.environment", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="connect, probe the dialects and time a guided round-trip")
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_help()
        return 0
    try:
        ready = check()
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop_own_server()  # the check returns once the server it started has exited, not seconds later
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
