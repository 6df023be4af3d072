"""The step table's columns: the one leaf every stage of the log engine agrees on."""

#: float columns of the table (NaN = not printed)
FLOAT_COLS = ("loss", "lr", "grad_norm", "loss_scale", "step_time_ms", "tokens_per_s", "samples_per_s",
              "tflops", "mfu_pct", "memory_gib", "epoch", "skipped", "nan_iters", "ts", "data_time_ms")
#: int64 columns (``NONE`` = absent); ``file`` is an index into ``StepStore.files``
INT_COLS = ("step", "iter", "rank", "line", "file", "has_loss", "has_grad_norm")
NONE = -(2**62)
