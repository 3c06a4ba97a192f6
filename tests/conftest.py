import pytest

from helpers.runtime.embedded import MODEL_ID


@pytest.fixture(scope="session")
def server():
    """The test run's embedded server (the root conftest gives the run a server of its own)."""
    from helpers.runtime.embedded import ensure_server

    return ensure_server()


@pytest.fixture(scope="session")
def server_url(server) -> str:
    return server.url


@pytest.fixture(scope="session")
def client(server):
    from helpers.runtime.client import embedded_client

    return embedded_client(server.url, server.key)


@pytest.fixture(scope="session")
def model() -> str:
    return MODEL_ID
