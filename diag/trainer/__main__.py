"""``python -m llmdiag.trainer ARGS`` (also under ``torchrun ... -m llmdiag.trainer``)."""

from llmdiag.trainer.launch import main

if __name__ == "__main__":
    main()
