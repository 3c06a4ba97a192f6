import pytest

from helpers.engine import MODEL_ID


@pytest.fixture(scope="session")
def server_url() -> str:
    from helpers.server_control import ensure_server

    return ensure_server()


@pytest.fixture(scope="session")
def client(server_url):
    from openai import DefaultHttpxClient, OpenAI

    return OpenAI(base_url=server_url, api_key="embedded", max_retries=0, timeout=300,
                  http_client=DefaultHttpxClient(trust_env=False))


@pytest.fixture(scope="session")
def model() -> str:
    return MODEL_ID
