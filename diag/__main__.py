"""`python -m diag` is the same as the `llmdiag` command."""

from llmdiag.cli import main

if __name__ == "__main__":
    main()
