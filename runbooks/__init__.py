"""Troubleshooting runbooks shipped as package data (one Markdown file per failure id)."""
