import pytest

from helpers.runtime.embedded import MODEL_ID


@pytest.fixture(scope="session")
def server_url() -> str:
    from helpers.runtime.embedded import ensure_server

    return ensure_server()


@pytest.fixture(scope="session")
def client(server_url):
    from helpers.runtime.backends import embedded_client

    return embedded_client(server_url)


@pytest.fixture(scope="session")
def model() -> str:
    return MODEL_ID
