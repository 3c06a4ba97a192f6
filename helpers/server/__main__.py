"""`python -m helpers.server --port 8765`: serve the embedded model on 127.0.0.1."""
from helpers.server.app import main

main()
