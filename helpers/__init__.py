"""Structured outputs for LLM agents: the code the workshop notebooks build, importable."""
