"""Probe plugins shipped with llmdiag: one module per probe family."""
