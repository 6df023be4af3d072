"""Fault injection shared by the training scripts. FAULT=kind:step[:rank]
kinds: nan, spike, gradnan, exc, kill, dlworker, none"""
import os, signal, math, torch

def parse():
    f = os.environ.get("FAULT", "none")
    if os.environ.get("FAULT_FIRST_ATTEMPT_ONLY") == "1" and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        f = "none"
    parts = f.split(":")
    kind = parts[0]
    step = int(parts[1]) if len(parts) > 1 else -1
    rank = int(parts[2]) if len(parts) > 2 else 0
    return kind, step, rank

KIND, STEP, FRANK = parse()

def my_rank():
    return int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))

def on_loss(loss, step):
    """step: 1-based optimizer step about to be taken"""
    if step == STEP and my_rank() == FRANK:
        if KIND == "nan":
            return loss * float("nan")
        if KIND == "spike":
            return loss * 50.0
    if KIND == "nan" and step > STEP and STEP > 0 and os.environ.get("NAN_PERSIST") == "1":
        return loss * float("nan")
    return loss

def before_backward(step):
    if step == STEP and my_rank() == FRANK:
        if KIND == "exc":
            raise RuntimeError(f"injected failure on rank {my_rank()} at step {step}: shape mismatch in custom loss")
        if KIND == "kill":
            os.kill(os.getpid(), signal.SIGKILL)

def after_backward(model, step):
    if KIND == "gradnan" and step == STEP and my_rank() == FRANK:
        for p in model.parameters():
            if p.grad is not None:
                p.grad.view(-1)[0] = float("nan")
                break

def sanitize_grads(model):
    """skip the update if grads are non-finite (keeps loss finite after a NaN grad norm)"""
    bad = False
    for p in model.parameters():
        if p.grad is not None and not torch.isfinite(p.grad).all():
            bad = True
    if bad:
        for p in model.parameters():
            if p.grad is not None:
                p.grad.zero_()
    return bad

class ToyDataset(torch.utils.data.Dataset):
    """random token sequences with a learnable pattern; dlworker fault: worker 1 calls os._exit
    after DL_AFTER items"""
    def __init__(self, n=4096, seq=32, vocab=512, seed=0):
        g = torch.Generator().manual_seed(seed)
        base = torch.randint(0, vocab, (n, 1), generator=g)
        self.x = (base + torch.arange(seq)) % vocab
        noise = float(os.environ.get("NOISE", "0"))
        if noise > 0:  # replace a fraction of tokens by random ones: the loss keeps a floor
            m = torch.rand(self.x.shape, generator=g) < noise
            self.x[m] = torch.randint(0, vocab, (int(m.sum()),), generator=g)
        self.n = n
        self.count = 0
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        if KIND == "dlworker":
            info = torch.utils.data.get_worker_info()
            if info is not None and info.id == 1:
                self.count += 1
                if self.count > int(os.environ.get("DL_AFTER", "40")):
                    os._exit(1)
        return self.x[i]
