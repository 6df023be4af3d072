"""Custom training loop for several launch/capture styles.
STYLE=accel|json|table|plain ; STEPS ; NW ; SAVE_EVERY ; SAVE_DIR ; FAULT (faults.py)"""
import os, sys, time, json, logging, math, torch, torch.nn as nn
sys.path.insert(0, os.path.dirname(__file__))
import faults

STYLE = os.environ.get("STYLE", "plain")
STEPS = int(os.environ.get("STEPS", "40"))
SAVE_EVERY = int(os.environ.get("SAVE_EVERY", "0"))
SAVE_DIR = os.environ.get("SAVE_DIR", "/tmp/h12_ckpt")
VOCAB = int(os.environ.get("VOCAB", "512"))

class TinyLM(nn.Module):
    def __init__(self, vocab=VOCAB, d=int(os.environ.get("D", "64"))):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.l1 = nn.Linear(d, 4 * d)
        self.l2 = nn.Linear(4 * d, d)
        self.head = nn.Linear(d, vocab)
    def forward(self, x):
        h = self.emb(x)
        h = h + self.l2(torch.relu(self.l1(h)))
        return self.head(h)

class JsonFormatter(logging.Formatter):
    def format(self, rec):
        d = {"time": self.formatTime(rec, "%Y-%m-%dT%H:%M:%S"), "level": rec.levelname,
             "logger": rec.name, "message": rec.getMessage()}
        d.update(getattr(rec, "fields", {}))
        if rec.exc_info:
            d["exc_info"] = self.formatException(rec.exc_info)
        return json.dumps(d)

torch.manual_seed(0)
model = TinyLM()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
ds = faults.ToyDataset(vocab=VOCAB)
nw = int(os.environ.get("NW", "0"))

acc = None
rank = int(os.environ.get("RANK", "0")); world = int(os.environ.get("WORLD_SIZE", "1"))
if STYLE == "accel":
    from accelerate import Accelerator
    from accelerate.logging import get_logger
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                        datefmt="%m/%d/%Y %H:%M:%S", level=logging.INFO)
    acc = Accelerator(cpu=os.environ.get("ACC_CPU", "1") == "1")
    log = get_logger("train")
    dl = torch.utils.data.DataLoader(ds, batch_size=int(os.environ.get("BS", "8")), shuffle=True, num_workers=nw)
    model, opt, dl = acc.prepare(model, opt, dl)
    log.info(acc.state, main_process_only=False)
    rank = acc.process_index; world = acc.num_processes
else:
    if world > 1:
        import torch.distributed as dist
        if os.environ.get("FRESH_STORE_PORT"):
            os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
            port = int(os.environ["FRESH_STORE_PORT"]) + int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        else:
            dist.init_process_group("gloo")
        model = nn.parallel.DistributedDataParallel(model)
        sampler = torch.utils.data.distributed.DistributedSampler(ds, seed=0)
        dl = torch.utils.data.DataLoader(ds, batch_size=int(os.environ.get("BS", "8")), sampler=sampler, num_workers=nw)
    else:
        dl = torch.utils.data.DataLoader(ds, batch_size=int(os.environ.get("BS", "8")), shuffle=True, num_workers=nw)
    if STYLE == "json":
        h = logging.StreamHandler(sys.stdout); h.setFormatter(JsonFormatter())
        logging.basicConfig(level=logging.INFO, handlers=[h])
    log = logging.getLogger("trainer")

sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 5))
HDR_EVERY = int(os.environ.get("HDR_EVERY", "10"))

def report(step, loss, gn, lr, dt, ntok):
    tps = ntok / dt
    if STYLE == "accel":
        log.info(f"step {step}/{STEPS} | loss {loss:.4f} | grad_norm {gn:.4f} | lr {lr:.3e} | {dt*1000:.1f} ms/it")
    elif STYLE == "json":
        log.info("train_step", extra={"fields": {"step": step, "loss": round(loss, 5) if math.isfinite(loss) else loss,
                 "grad_norm": round(gn, 5) if math.isfinite(gn) else gn, "lr": lr, "tokens_per_sec": round(tps, 1)}})
    elif STYLE == "table":
        if (step - 1) % HDR_EVERY == 0:
            print(f"{'step':>6} {'loss':>10} {'grad_norm':>10} {'lr':>10} {'tok/s':>10}")
            print("-" * 50)
        print(f"{step:>6} {loss:>10.4f} {gn:>10.4f} {lr:>10.2e} {tps:>10.0f}", flush=True)
    else:
        if rank == 0:
            print(f"[rank{rank}] step {step}/{STEPS} loss={loss:.4f} grad_norm={gn:.3f} lr={lr:.2e}", flush=True)

if STYLE == "json":
    def _hook(t, v, tb):
        log.critical("uncaught exception, training aborted", exc_info=(t, v, tb))
    sys.excepthook = _hook
    log.info("starting training", extra={"fields": {"max_steps": STEPS, "world_size": world}})
step = 0
it = iter(dl)
while step < STEPS:
    try:
        x = next(it)
    except StopIteration:
        it = iter(dl); x = next(it)
    step += 1
    t0 = time.time()
    faults.before_backward(step)
    logits = model(x[:, :-1])
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
    loss = faults.on_loss(loss, step)
    opt.zero_grad()
    if acc: acc.backward(loss)
    else: loss.backward()
    faults.after_backward(model, step)
    gn = (acc.clip_grad_norm_(model.parameters(), 1.0) if acc else torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
    faults.sanitize_grads(model)
    opt.step(); sched.step()
    dt = time.time() - t0
    report(step, loss.item(), float(gn), sched.get_last_lr()[0], dt, x.numel())
    if SAVE_EVERY and step % SAVE_EVERY == 0 and rank == 0:
        os.makedirs(SAVE_DIR, exist_ok=True)
        path = os.path.join(SAVE_DIR, f"ckpt_step{step}.pt")
        if STYLE == "json": log.info("saving checkpoint", extra={"fields": {"step": step, "path": path}})
        else: print(f"saving checkpoint to {path}", flush=True)
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, path)
if STYLE == "json":
    log.info("training finished", extra={"fields": {"steps": step}})
elif rank == 0:
    print(f"training finished after {step} steps", flush=True)
if acc: acc.end_training()
elif world > 1:
    import torch.distributed as dist
    dist.destroy_process_group()
