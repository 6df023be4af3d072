"""Progress lines → step records, for every common trainer, detected per line.

One field regex knows the key spellings of Megatron-LM (old and new layouts), GPT-NeoX,
DeepSpeed, HF Trainer dicts, JSON lines, torchtitan, Lightning / litgpt, nanoGPT and plain
``key=value`` (the llmdiag trainer's line): ``key: value``, ``key=value``, ``'key': value``,
``"key": value`` and nanoGPT's ``key value``. Keys map to canonical names; values keep
units (``ms``/``s``, ``GiB``, ``%``) and thousands separators. A line is a step record when
it carries a training loss (or is a Megatron iteration line); a line whose loss is a
validation loss is an eval record.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

NUM = (r"[-+]?(?:nan|NaN|NAN|-?inf|Inf|INF|infinity|"
       r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)")

#: spelling (lower case, as printed) -> canonical field
ALIASES: dict[str, str] = {}
for canon, names in {
    "loss": ["lm loss", "lm_loss", "train loss", "train_loss", "training loss", "training_loss", "train/loss",
             "loss", "avg loss", "total_loss", "reduced_train_loss", "train/loss_step", "train_loss_step", "closs",
             "avr_loss", "avg_loss", "loss train", "loss/train", "train/loss_epoch",
             # cross-entropy by its own name (OpenNMT-py "xent:", fairseq "nll_loss")
             "xent", "cross_entropy", "cross_entropy_loss", "ce_loss", "nll_loss"],
    # perplexity = exp(cross-entropy): the loss of a record that prints no loss of its own
    "ppl": ["ppl", "perplexity", "train_ppl", "train/ppl"],
    "val_loss": ["val loss", "val_loss", "validation loss", "valid loss", "eval_loss", "eval loss", "val/loss",
                 "validation_loss"],
    "step": ["step", "global_step", "global step", "steps", "trainer/global_step", "optimizer step",
             "num_updates"],
    "iter": ["iter", "iteration", "it", "micro_step"],
    "lr": ["learning rate", "learning_rate", "lr", "train/learning_rate", "lr-adam"],
    # llm.c prints the gradient norm as a bare "norm"
    "grad_norm": ["grad norm", "grad_norm", "gradient norm", "grad-norm", "gnorm", "train/grad_norm", "norm",
                  "grad_l2_norm", "total_norm", "grad/norm", "gradient_norm"],
    "loss_scale": ["loss scale", "loss_scale", "loss-scale", "scale"],
    "step_time_ms": ["elapsed time per iteration (ms)", "iter time", "time", "step_time_ms", "step time",
                     "iteration time", "time/iter", "elapsed_time_per_iteration_ms", "dt", "time_ms"],
    # the time a step waited for its batch (mmcv/mmengine, detectron2 print seconds): a rank's own time, not
    # the all-reduce's, so the rank whose data time carries a slow-down is the one the others wait for
    "data_time_ms": ["data_time", "data time", "data_time_ms", "time/data", "dataloader_time", "data_wait_time",
                     "data_load_time"],
    "step_time_s": ["elapsed time per iteration (s)", "step_time", "step_time_s", "sec/it", "s/it",
                    "iter_time", "train_runtime_per_step"],
    "tokens_per_s": ["tps", "tokens_per_s", "tokens/s", "tok/s", "tokens per second", "tokens_per_second",
                     "wps", "tokens/sec", "throughput (tokens/s)"],
    "samples_per_s": ["samples/sec", "samples per second", "samples_per_second", "samples/s",
                      "train_samples_per_second", "currsamplespersec", "it/s"],
    "tflops": ["throughput per gpu (tflop/s/gpu)", "tflops", "tflop/s", "approx flops per gpu", "tflops/gpu",
               "model tflops", "tflops_per_gpu"],
    "mfu_pct": ["mfu"],
    "memory_gib": ["memory", "mem_gib", "mem", "max memory allocated", "memory_gib", "max_reserved"],
    "epoch": ["epoch"],
    "skipped": ["number of skipped iterations", "skipped", "skipped iterations"],
    "nan_iters": ["number of nan iterations"],
    "global_batch_size": ["global batch size", "global_batch_size"],
    "consumed_samples": ["consumed samples", "consumed_samples"],
}.items():
    for n in names:
        ALIASES[n] = canon

#: families that read unambiguously in nanoGPT's / Lightning's spaced ``key value`` form ("train_loss 3.21",
#: "norm 15.4"); other spellings need a ``:`` or ``=`` (a bare "memory 3" or "time 5" is too loose)
SPACED_FAMILIES = frozenset({"loss", "val_loss", "grad_norm", "lr", "loss_scale", "tokens_per_s"})
SPACED_KEYS = frozenset({"iter", "step", "time", "mfu", "epoch", "iteration", "global step", "global_step"})
#: a time whose key does not say what it covers: an iteration time only with a unit it was printed in for one
#: step (nanoGPT's "time 123.45ms"); a bare "Time: 4.52" is as often the seconds of a window of N batches,
#: or the time since the start, and read as an iteration time it makes a throughput drop out of nothing
BARE_TIME = frozenset({"time"})
#: a value followed by a unit that names its family ("(3032.12 ms | 1351 tok/s)": llm.c)
UNIT_FAMILIES = {"tok/s": "tokens_per_s", "tokens/s": "tokens_per_s", "tokens/sec": "tokens_per_s",
                 "samples/s": "samples_per_s", "samples/sec": "samples_per_s"}

#: loss spellings that name a running average: a line that prints one next to the step's own loss
#: ("avg_loss=2.31 loss=2.95") is read for the step's loss; the average only when it is alone
AVERAGE_LOSS = frozenset({"avg loss", "avr_loss", "avg_loss"})

#: a loss the vocabulary does not spell ("loss_net", "step_loss", "loss_total") is still of the loss family: a
#: key that contains "loss" and is none of these (an evaluation's loss, the loss scale, a running average)
OTHER_LOSS_WORDS = ("val", "valid", "eval", "test", "dev", "scale", "scaler")
AVERAGE_LOSS_WORDS = ("avg", "average", "mean", "running", "smooth", "ema")
#: a scalar printed inside its type's repr: torch's "tensor(0.6924, device='cuda:0', ...)", numpy's
#: "np.float32(0.69)", jax's "Array(0.69, dtype=float32)"
_WRAP = r"(?:tensor\(|(?:np\.|numpy\.)?float(?:16|32|64)\(|Array\()"
# a value ends where no word character, colon or decimal-like ".x" follows: a sentence's full stop may
# ("train_mel_loss_before = nan."); "loss_scaler.py:181:update_scale" is a source location
_LOSS_LIKE = re.compile(r"(?<![\w/.-])['\"]?(?P<key>(?:[A-Za-z_][\w/.-]*?)?loss(?:[\w/.-]*?| [A-Za-z]{2,12}(?=\s*[:=])))['\"]?(?:\s*[:=]\s*"
                        r"(?:['\"]|" + _WRAP + r")?|\s+" + _WRAP + r")(?P<val>" + NUM + r")(?![\w:]|\.\w)", re.IGNORECASE)

_KEYS = "|".join(re.escape(k) for k in sorted(ALIASES, key=len, reverse=True))
# key, separator, optional opening bracket or quote (a value printed as a string: transformers 5
# logs its records' numbers quoted, {'loss': '5.383'}; the closing quote must match), number, unit
FIELD = re.compile(
    r"(?<![\w/.-])['\"]?(?P<key>" + _KEYS + r")['\"]?"
    r"(?P<sep>\s*[:=]\s*|\s+)(?:\[|(?P<q>['\"])|" + _WRAP + r")?(?P<val>" + NUM + r")(?(q)(?P=q))(?![\w.])?(?P<unit>\s?(?:ms|s|GiB|GB|MiB|MB|%|TFLOPS)\b)?",
    re.IGNORECASE,
)
# plain key=value lines (the llmdiag trainer, most custom loops): one simple token regex is
# several times cheaper than the general FIELD alternation
_KV = re.compile(r"(?<![\w/.-])([A-Za-z_][\w/.-]*)=\[?(" + NUM + r")(ms|s|GiB|GB|MiB|MB|%)?(?![\w.])")
#: a metric name under a namespace ("actor/grad_norm", "optim/total_grad_norm", "throughput/device/tokens_per_second":
#: wandb-style names that verl, OLMo and Composer print): read by its last component, or that component's tail
#: after an underscore ("total_grad_norm" is of the grad-norm family), unless a component names an evaluation
_NS_FIELD = re.compile(r"(?<![\w/.-])(?P<ns>[A-Za-z_][\w.-]*(?:/[\w.-]+)*)/(?P<key>[A-Za-z_][\w.-]*)['\"]?\s*[:=]\s*"
                       r"(?:\[|(?P<q>['\"]))?(?P<val>" + NUM + r")(?(q)(?P=q))(?![\w.])")
_NS_SKIP = frozenset({"val", "valid", "validation", "eval", "test", "dev", "timing", "timing_s", "time", "perf_time"})
_EVAL_LINE = re.compile(r"\s*step \d+: train loss [^,]+, val loss")
_MEGATRON = re.compile(r"(?<![\w])iteration\s+(?P<it>\d+)\s*/\s*(?P<total>\d+)\s*\|")
# litgpt: "iter 12 step 3: loss 9.1, ..." (older), "iter 339 step 339 | loss train: 14.500, val: n/a | ..." (newer)
_LITGPT = re.compile(r"(?<![\w])iter (?P<it>\d+) step (?P<step>\d+)\s*[:|]")
_UNIT_VALUE = re.compile(r"(?<![\w.])(?P<val>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s?(?P<unit>"
                         + "|".join(re.escape(u) for u in sorted(UNIT_FAMILIES, key=len, reverse=True)) + r")(?![\w/])")
_PIPE_FIELD = re.compile(r"\|\s*(?P<key>[^|:]+?)\s*:?\s+(?P<val>" + NUM + r")\s*(?=\|)")
#: a bare "N/M" counter ("Epoch 0, batch 20/100 | loss ...", "| epoch 001:  100 / 1505 loss=..."): not part of a
#: date, a path or a ratio inside a word
_COUNT_OF = re.compile(r"(?<![\w./:-])(?P<it>\d+)\s*/\s*(?P<n>\d+)(?![\w./:-])")
#: a batch counter: spaced ("Epoch 11, batch 1200, loss[...]": icefall, many custom loops) or with its total
#: ("batch: 20/100"); a "batch: 8" or "batch=8" alone is as often the batch size, and is not read
_BATCH_COUNT = re.compile(r"(?<![\w/.-])[Bb]atch(?:\s+|\s*[:=]\s*(?=\d+\s*/\s*\d))(?P<it>\d+)(?![\w.])")
#: a per-epoch bar: tqdm's "Epoch 1:  12%|█▏   | 12/100 [...]" and rich's "Epoch 1/4 ━━━━╸━━━ 12/100 0:00:01 • ..."
_EPOCH_STEP = re.compile(r"Epoch (?P<ep>\d+)(?:/\d+)?:?\s+(?:\d+%\|.*?\|\s*|[━╸╺╾╼─ ]+)(?P<it>\d+)/(?P<n>\d+)")
#: MetricLogger (LLaMA-Accessory, DETR, timm): "Epoch: [2]  [1000/1504]  lr: ...  closs: 0.92 (0.90)";
#: mmcv / mmengine: "Epoch [1][100/62598]\tlr: ...", "Epoch(train) [1][200/735]  lr: ..."
_BRACKET_STEP = re.compile(r"\]\s*\[\s*(?P<it>\d+)/(?P<n>\d+)\]")
#: any tqdm bar whose postfix carries the loss: "steps:   1%|▋   | 41/3280 [00:50<1:06:54,  1.24s/it, avr_loss=nan]"
#: (the count is the bar's only when the loss is in the bar's own postfix, not in a dict printed after it)
_BAR_STEP = re.compile(r"\|\s*(?P<it>\d+)/(?P<n>\d+)\s*\[\d[^\]{]*?loss")
#: a tqdm bar without a total (an iterable of unknown length: NeMo 1.x, Lightning's "Epoch 0: : 10it [00:10, ...]")
_BAR_COUNT = re.compile(r"(?<![\w.])(?P<it>\d+)it \[\d[^\]{]*?loss")


def to_float(text: str) -> float | None:
    try:
        return float(text)  # the common case, without the string clean-up below
    except ValueError:
        pass
    t = text.replace(",", "").strip().lower()
    try:
        v = float(t)
    except ValueError:
        return None
    return v


def _unit_scale(canon: str, unit: str, value: float) -> tuple[str, float]:
    if canon not in ("step_time_ms", "step_time_s", "memory_gib", "data_time_ms"):
        return canon, value
    unit = (unit or "").strip().lower()
    if canon == "data_time_ms":  # in ms only when printed so; mmcv's and detectron2's bare numbers are seconds
        return canon, value if unit == "ms" else value * 1000.0
    if canon == "step_time_ms" and unit == "s":
        return "step_time_ms", value * 1000.0
    if canon == "step_time_s":
        return "step_time_ms", value * (1.0 if unit == "ms" else 1000.0)
    if canon == "memory_gib" and unit in ("mib", "mb"):
        return canon, value / 1024.0
    if canon == "memory_gib" and not unit and value > 2048:
        # no unit, and more than any GPU holds in GiB: MiB (mmcv/mmengine print "memory: 5280", torch's MiB)
        return canon, value / 1024.0
    return canon, value


def parse_progress(msg: str) -> dict | None:
    """A step (or eval) record from one message, or None when the line is not a progress line."""
    rec: dict = {}
    # substring guards first: a regex that starts with a lookbehind cannot skip ahead quickly
    mg = _MEGATRON.search(msg) if "iteration" in msg else None
    if mg:
        rec["iter"] = int(mg["it"])
        rec["train_iters"] = int(mg["total"])
        rec["format"] = "megatron"
        for f in _PIPE_FIELD.finditer(msg, mg.end() - 1):
            key = f["key"].strip().lower()
            canon = ALIASES.get(key)
            if canon is None and key.endswith("loss") and not key.startswith(("lm", "val")):
                rec.setdefault("extra", {})[key] = to_float(f["val"])
                continue
            if canon is None:
                continue
            v = to_float(f["val"])
            if v is not None:
                canon, v = _unit_scale(canon, "s" if "(s)" in key else "", v)
                rec.setdefault(canon, v)
        if "loss" not in rec and "skipped" not in rec and msg.rstrip().endswith("|"):
            # the record goes on: a wrapped paste puts its loss, grad norm and counters on the next lines
            rec["open"] = True
        return _finish(rec)
    lit = _LITGPT.search(msg) if "iter " in msg and " step " in msg else None
    start = 0
    if lit:
        rec["iter"], rec["step"], rec["format"] = int(lit["it"]), int(lit["step"]), "litgpt"
        rec["optimizer_step"] = "(optimizer.step)" in msg or "(step)" in msg
        start = lit.end()
    if "=" in msg and ":" not in msg and "'" not in msg and '"' not in msg and " - " not in msg:
        for f in _KV.finditer(msg, start):
            canon = ALIASES.get(f[1].lower())
            if canon == "loss" and f[1].lower() in AVERAGE_LOSS:
                canon = "_avg_loss"
            if canon is None or canon in rec:
                continue
            v = to_float(f[2])
            if v is not None:
                canon, v = _unit_scale(canon, f[3] or "", v)
                rec.setdefault(canon, v)
        _average_if_alone(rec)
        if "loss" in rec:
            start = len(msg)  # else a spaced "loss = 3.07" (torch-rnn, TF-Slim): the general fields below
    for f in FIELD.finditer(msg, start):
        key = f["key"].lower()
        canon = "_avg_loss" if key in AVERAGE_LOSS else ALIASES[key]
        sep = f["sep"]
        # nanoGPT's "key value" form only for words that are unambiguous without a colon
        if not sep.strip() and key not in SPACED_KEYS and canon not in SPACED_FAMILIES:
            continue
        if key in BARE_TIME and (f["unit"] or "").strip().lower() != "ms":
            continue
        v = to_float(f["val"])
        if v is None or (canon in ("step", "iter", "epoch") and msg.startswith("%", f.end("val"))):
            continue  # "steps:   4%|▍  | 123/3280": a tqdm bar's percentage is not a counter
        canon, v = _unit_scale(canon, f["unit"] or "", v)
        if canon in rec:
            if canon == "loss" and not math.isfinite(v):
                # another loss of the record (a component: DPO/ORPO's nll_loss) is NaN: the step is a NaN step,
                # whatever its headline loss (the HF Trainer's NaN filter prints that one as 0)
                rec["nan_iters"] = max(rec.get("nan_iters", 0), 1)
            continue
        rec[canon] = v
    _average_if_alone(rec)
    if "/" in msg:
        _namespaced(msg, rec)
    if "loss" not in rec and "val_loss" not in rec and rec:
        _loss_by_family(msg, rec)
    if "loss" not in rec and "val_loss" not in rec:
        return None
    if "/s" in msg:
        for u in _UNIT_VALUE.finditer(msg):
            canon = UNIT_FAMILIES[u["unit"].lower()]
            if canon not in rec:
                rec[canon] = float(u["val"])
    if "train_runtime" in msg or "train_steps_per_second" in msg or "Averaged stats" in msg:
        return None  # an end-of-training / end-of-epoch summary (HF Trainer, MetricLogger), not a step
    if "step" not in rec and "iter" not in rec:
        bar = _EPOCH_STEP.search(msg) if "Epoch " in msg else None
        if bar and bar["it"] == "0":
            return None  # a bar drawn (or reset) before its first step: its postfix is an earlier step's
        if bar:
            # the bar counts the epoch's batches from 0 again: the run's position is epoch x total + count
            # (Lightning's global step), so every epoch's records are new steps, not repeats of the first's
            rec["iter"] = int(bar["ep"]) * int(bar["n"]) + int(bar["it"])
            rec["bar"] = True
        elif "/" in msg and (br := _BRACKET_STEP.search(msg)):
            rec["iter"] = int(br["it"])
        elif "|" in msg and (tq := _BAR_STEP.search(msg)):
            rec["iter"] = int(tq["it"])
            rec["bar"] = True
        elif "it [" in msg and (tq := _BAR_COUNT.search(msg)):
            rec["iter"] = int(tq["it"])
        elif ("batch" in msg or "Batch" in msg) and (bt := _BATCH_COUNT.search(msg)):
            rec["iter"] = int(bt["it"])
        elif "/" in msg and (counts := [(int(c["n"]), int(c["it"])) for c in _COUNT_OF.finditer(msg)
                                        if 0 <= int(c["it"]) <= int(c["n"]) and int(c["n"]) > 1]):
            # of several counts ("Train: 1/3 ( 33%) [ 49/323 ( 15%)]": epoch and batch), the innermost loop's:
            # the one with the largest total
            rec["iter"] = max(counts)[1]
        elif "|" in msg and (lead := _LEAD_CELL.match(msg)):
            # a row of "|"-separated cells whose first is a bare integer: the iteration (llama2.c's
            # "500 | loss 6.0091 | lr 5e-05 | 870067.53ms | mfu 0.19%")
            rec["iter"] = int(lead[1])
    if "|" in msg and "step_time_ms" not in rec and (cell := _TIME_CELL.search(msg)):
        rec["step_time_ms"] = float(cell[1]) * (1000.0 if cell[2] == "s" else 1.0)  # a bare "8060.78ms" cell
    if "format" not in rec:
        rec["format"] = _guess_format(msg)
    if rec["format"] in ("hf-trainer", "jsonl") and "}" not in msg:
        rec["open"] = True  # a dict printed over several lines (pprint, json.dumps(indent=...)): the rest follows
    if _EVAL_LINE.match(msg):
        rec["_eval_line"] = True
    return _finish(rec)


_LEAD_CELL = re.compile(r"\s*(\d+)\s*\|")
_TIME_CELL = re.compile(r"\|\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*(?:\||$)")
_DIGIT = re.compile(r"\d")
_COLUMN_NAME = re.compile(r"[A-Za-z_][\w/.()%-]*(?: [A-Za-z_][\w/.()%-]*)*")
_HEADER_SEP = (re.compile(r"\s*\|\s*|\t+|\s{2,}"), re.compile(r"\s+"))
_ROW_SEP = re.compile(r"\s*\|\s*|\s+")
#: a CSV file's header and rows (Lightning's CSVLogger metrics.csv, a trainer's own CSV): cells may be empty
_CSV_SEP = re.compile(r"\s*,\s*")
#: a table's rule line (a row of dashes under its header: "-----+-----", "=====") or a blank line: the table goes on
_RULE = re.compile(r"[\s\-=+|:]*")


class Table(NamedTuple):
    """A header's columns as canonical fields (None for one the vocabulary does not know), and whether its
    rows are comma-separated (a CSV: empty cells are values not printed)."""
    cols: list
    csv: bool = False


def table_header(msg: str) -> Table | None:
    """The columns of a header that a table of numbers follows ("step  loss  lr  grad_norm",
    "| iter | loss | tok/s |") as canonical fields (None for a column the vocabulary does not know), or None
    when the line is no such header: names only, a loss among them, and enough of them known."""
    if _DIGIT.search(msg):
        return None
    csv = "," in msg
    for sep, share in ((_CSV_SEP, 0.5),) if csv else zip(_HEADER_SEP, (0.5, 1.0)):
        names = [t for t in sep.split(msg.strip(" |\t")) if t]
        if len(names) < 2 or not all(_COLUMN_NAME.fullmatch(t) for t in names):
            continue
        cols = [ALIASES.get(t.lower()) for t in names]
        known = [c for c in cols if c is not None]
        # columns set apart by wide gaps, bars or commas: half of them known; by single spaces (prose looks
        # alike: "Resetting step and loss") every one
        if "loss" in cols and len(known) >= 2 and len(known) >= share * len(cols):
            return Table(cols, csv)
    return None


def table_goes_on(msg: str, table: Table) -> bool:
    """A line inside a table that is no row: its rule, a blank line, or its header printed again."""
    if _RULE.fullmatch(msg):
        return True
    again = table_header(msg)
    return again is not None and again.cols == table.cols


def table_row(msg: str, table: Table) -> dict | None:
    """One row of numbers under a :func:`table_header`, or None when the line is no row of that table; ``{}``
    for a row without a loss (a CSV's validation row: the table goes on, the row is no step record)."""
    cols = table.cols
    if table.csv:
        vals = _CSV_SEP.split(msg.strip())
    else:
        vals = [t for t in _ROW_SEP.split(msg.strip(" |\t")) if t]
    if len(vals) != len(cols):
        return None
    rec: dict = {}
    for canon, tok in zip(cols, vals):
        if not tok and table.csv:
            continue  # an empty cell: not logged at this step
        v = to_float(tok.rstrip("%"))
        if v is None:
            return None
        if canon is not None and canon not in rec:
            canon, v = _unit_scale(canon, "", v)
            rec[canon] = v
    if "loss" not in rec:
        return {}
    rec["format"] = "table"
    return _finish(rec)


#: one ``key=value`` of a tqdm bar's postfix
_POSTFIX_KV = re.compile(r"(?<![\w/.-])([A-Za-z_][\w/.-]*)=(" + NUM + r")")


def bar_reader(seg: str, rec: dict):
    """A reader for every redraw of the bar line whose redraw ``seg`` gave the bar record ``rec``: a regex for
    each redraw's head (epoch or an empty group, count, total) and one per postfix field that ``rec`` has
    (``train_loss=``), each run once over the whole line, and the fields' canonical names; None when the
    redraw's shape is not one this reader takes (the line is then read redraw by redraw)."""
    lead = _EPOCH_STEP.search(seg)
    br = seg.rfind("[")
    if br < 0 or not rec.get("bar"):
        return None
    keys = [(m[1], ALIASES.get(m[1].lower())) for m in _POSTFIX_KV.finditer(seg, br)]
    keys = [(k, c) for k, c in keys if c is not None and c in rec and isinstance(rec[c], float)]
    if not any(c == "loss" for _, c in keys) or len({k for k, _ in keys}) != len(keys):
        return None
    head = re.compile((r"Epoch (\d+)(?:/\d+)?:?\s+\d+%\|[^|\r]*\|\s*" if lead else r"()\|\s*")
                      + r"(\d+)/(\d+)\s*\[")
    # the key's literal first (re scans for it fast), then the check that it is not the tail of a longer key
    fields = [(re.compile(re.escape(k) + "=" + r"(?<![\w/.-]" + re.escape(k) + "=)(" + NUM + r")"), c)
              for k, c in keys]
    return head, fields, bool(lead)


_COUNTER = (r"(?P<{0}>step|steps|iter|iteration|global[_ ]step|batch|epoch)\s*[:=#]?\s*(?P<{1}>\d{{1,3}}(?:,\d{{3}})+|\d+)"
            r"(?:\s*/\s*(?:\d{{1,3}}(?:,\d{{3}})+|\d+))?")
#: a line that is only a record's counter(s): Composer's "[batch=12/100]:" (older: "[epoch=1][batch=12/100]:"),
#: OLMo's "[step=10/739328,epoch=0]", "=== Step 10 ===": the record's fields follow on lines of their own
_HEADER = re.compile(r"[\s\[(<=#*-]*" + _COUNTER.format("a", "an") + r"(?:[\s\])>,;|]*[\[(<]?\s*" + _COUNTER.format("b", "bn")
                     + r")?[\s\])>=#*:-]*", re.IGNORECASE)
#: one "name: number" / "name=number" piece of such a record, alone on its line ("\t Train loss/train/total: 3.2",
#: "    train/CrossEntropyLoss=7.1")
_PIECE = re.compile(r"\s*[A-Za-z_][\w /().%-]{0,80}?\s*[:=]\s*['\"]?" + NUM + r"['\"]?\s*(?:[A-Za-z%/]{1,8})?\s*,?\s*")


_LEVEL_TAIL = re.compile(r"(?<![\w-])(?:DEBUG|INFO|NOTICE|WARNING|WARN)\b[\s:|\]-]+(?P<h>\[[^\]\n]{1,60}\](?:\[[^\]\n]{1,60}\])?:?)\s*$")


def counter_header(msg: str) -> dict | None:
    """The open record a counter-only line starts (``{"step": 12, "open": True, "format": "header"}``), or None.
    An epoch alone is no record's header (an epoch's many records follow it)."""
    m = _HEADER.fullmatch(msg) if len(msg) <= 96 else None
    if m is None:
        # behind a logger's own columns that end in its level word (OLMo: "host:0  olmo.train:908  INFO    [step=..]")
        lv = _LEVEL_TAIL.search(msg, max(0, len(msg) - 160))
        m = _HEADER.fullmatch(lv["h"]) if lv is not None and len(lv["h"]) <= 96 else None
    if m is None:
        return None
    rec: dict = {}
    for name, n in ((m["a"], m["an"]), (m["b"], m["bn"])):
        if name is None:
            continue
        key = name.lower().replace(" ", "_")
        canon = "epoch" if key == "epoch" else "iter" if key.startswith("iter") else "step"
        rec.setdefault(canon, int(n.replace(",", "")))
    if "step" not in rec and "iter" not in rec:
        return None
    rec.update(open=True, format="header")
    return rec


def header_piece(msg: str) -> dict | None:
    """The fields of one line of a header record (:func:`counter_header`): ``{}`` for a piece whose name the
    vocabulary does not know (the record goes on), None for a line that is no such piece (the record ends)."""
    if _PIECE.fullmatch(msg) is None:
        return None
    rec = fields_of(msg)
    if "/" in msg:
        _namespaced(msg, rec)
    if "loss" not in rec and "val_loss" not in rec:
        f = FIELD.fullmatch(msg.strip().rstrip(","))
        if f is None:
            _loss_by_family(msg, rec)
    for k in ("step", "iter", "epoch"):
        rec.pop(k, None)
    return rec


def fields_of(msg: str) -> dict:
    """The metric fields of a piece of a record that has no counter of its own (the lines a record split
    over several lines goes on with: ``lm loss: 6.9E-01 | loss scale: 1.0 |``, ``grad norm: 0.7 | ...``)."""
    rec: dict = {}
    if "|" in msg:
        for f in _PIPE_FIELD.finditer("|" + msg.strip().rstrip("|") + "|"):
            canon = ALIASES.get(f["key"].strip().lower())
            v = to_float(f["val"])
            if canon is not None and canon not in ("step", "iter") and v is not None:
                canon, v = _unit_scale(canon, "s" if "(s)" in f["key"] else "", v)
                rec.setdefault(canon, v)
        return rec
    for f in FIELD.finditer(msg):  # a dict's or key: value list's next lines ("'grad_norm': 1.2,")
        canon = ALIASES[f["key"].lower()]
        v = to_float(f["val"])
        if f["sep"].strip() and canon not in ("step", "iter") and v is not None:
            canon, v = _unit_scale(canon, f["unit"] or "", v)
            rec.setdefault(canon, v)
    return rec


def ns_family(ns: str, key: str) -> str | None:
    """The canonical field of a namespaced metric name (``ns/key``), or None: the key's own spelling, else the
    longest underscore-separated tail of it that the vocabulary spells; none under an evaluation's namespace,
    and never a counter (a namespaced "step" is a time or a rate: ``timing_s/step``)."""
    if any(w in _NS_SKIP for w in ns.lower().split("/")):
        return None
    key = key.lower()
    canon = ALIASES.get(key)
    if canon is None:
        parts = key.split("_")
        for i in range(1, len(parts)):
            canon = ALIASES.get("_".join(parts[i:]))
            if canon is not None:
                break
    if canon in (None, "step", "iter", "epoch", "loss", "val_loss"):
        return None  # a namespaced loss is the loss family's (_loss_by_family): several may be printed
    return canon


def _namespaced(msg: str, rec: dict) -> None:
    """The fields of a record printed under namespaces (``actor/grad_norm:0.5``), where the plain readers did
    not set them."""
    for f in _NS_FIELD.finditer(msg):
        canon = ns_family(f["ns"], f["key"])
        if canon is None or canon in rec:
            continue
        v = to_float(f["val"])
        if v is not None:
            rec[canon] = v


def _loss_by_family(msg: str, rec: dict) -> None:
    """The loss of a record whose other fields were read but whose loss key the vocabulary does not spell: the
    step losses of the loss family (else the running averages): one, or the sum of several parts printed
    without their total."""
    step, avg = {}, {}
    for f in _LOSS_LIKE.finditer(msg):
        words = re.split(r"[\W_]+", f["key"].lower())
        if any(w in OTHER_LOSS_WORDS for w in words) or f["key"].lower() in ALIASES:
            continue
        (avg if any(w in AVERAGE_LOSS_WORDS for w in words) else step).setdefault(f["key"].lower(), f["val"])
    for found in (step, avg):
        if not found:
            continue
        # one loss of the family is the loss; several without their total (a detector's loss_cls and
        # loss_bbox, a diffusion model's "Loss mse" and "Loss ce") add up to it, a NaN part to a NaN loss
        vals = [to_float(v) for v in found.values()]
        if all(v is not None for v in vals):
            rec["loss"] = math.fsum(vals) if all(map(math.isfinite, vals)) else math.nan
        return


def _average_if_alone(rec: dict) -> None:
    """The running-average loss stands for the loss only on a line without the step's own."""
    avg = rec.pop("_avg_loss", None)
    if avg is not None and "loss" not in rec:
        rec["loss"] = avg


def _guess_format(msg: str) -> str:
    s = msg.lstrip()
    if s.startswith("{'") or "{'loss'" in s:
        return "hf-trainer"
    if s.startswith("{"):
        return "jsonl"
    if "tps:" in msg and "mfu:" in msg:
        return "torchtitan"
    if re.match(r"iter \d+:", s):
        return "nanogpt"
    if "=" in msg:
        return "key-value"
    return "generic"


def _finish(rec: dict) -> dict:
    for k in ("iter", "step"):
        if k in rec and isinstance(rec[k], float):
            if math.isfinite(rec[k]) and rec[k] == int(rec[k]):
                rec[k] = int(rec[k])
            else:
                del rec[k]
    # an eval record: only a validation loss, or nanoGPT's "step N: train loss X, val loss Y"
    # (a Lightning bar that shows train_loss and the last val_loss is still a training step)
    if "val_loss" in rec and ("loss" not in rec or rec.pop("_eval_line", False)):
        rec["eval"] = True
    rec.pop("_eval_line", None)
    ppl = rec.pop("ppl", None)
    if "loss" not in rec and isinstance(ppl, (int, float)) and not isinstance(ppl, bool):
        rec["loss"] = math.log(ppl) if math.isfinite(ppl) and ppl > 0 else float("nan")
    if "loss" not in rec and "val_loss" not in rec and rec.get("format") != "megatron":
        return None  # type: ignore[return-value]
    return rec


def is_nan(v: float | None) -> bool:
    return v is not None and not math.isfinite(v)
