"""`python -m diag` is the same as the `llmdiag` command."""

from diag.cli import main

if __name__ == "__main__":
    main()
