"""Fault injection shared by the h9 test scripts (env-driven).
FAULT = hang|slow|raise|sigkill|sigsegv|sigabrt|nan|nan_all|exit  FAULT_RANK, FAULT_STEP."""
import os, signal, time, math

FAULT = os.environ.get("FAULT", "")
FAULT_RANK = int(os.environ.get("FAULT_RANK", "1"))
FAULT_STEP = int(os.environ.get("FAULT_STEP", "5"))


def before_step(rank, step):
    """Called at the top of a step, before forward/backward and the collective."""
    if not FAULT or step < FAULT_STEP:
        return
    mine = rank == FAULT_RANK
    if FAULT == "hang" and mine and step == FAULT_STEP:
        time.sleep(10_000)
    if FAULT == "slow" and mine:
        time.sleep(1.0)
    if FAULT == "raise" and mine and step == FAULT_STEP:
        raise RuntimeError(f"injected failure: bad batch on rank {rank} at step {step}")
    if FAULT == "sigkill" and mine and step == FAULT_STEP:
        os.kill(os.getpid(), signal.SIGKILL)
    if FAULT == "sigsegv" and mine and step == FAULT_STEP:
        import ctypes
        ctypes.string_at(0)  # real segmentation fault
    if FAULT == "sigabrt" and mine and step == FAULT_STEP:
        os.abort()
    if FAULT == "exit" and mine and step == FAULT_STEP:
        return "exit"
    return None


def loss_factor(rank, step):
    if FAULT == "nan" and rank == FAULT_RANK and step == FAULT_STEP:
        return math.nan   # only this rank, only this step; DDP spreads it through the grads
    if FAULT == "inf" and rank == FAULT_RANK and step == FAULT_STEP:
        return math.inf
    if FAULT == "nan_all" and step >= FAULT_STEP:
        return math.nan
    return 1.0
