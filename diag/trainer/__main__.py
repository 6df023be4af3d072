"""``python -m diag.trainer ARGS`` (also under ``torchrun ... -m diag.trainer``)."""

from diag.trainer.launch import main

if __name__ == "__main__":
    main()
