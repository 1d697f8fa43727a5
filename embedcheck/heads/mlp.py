"""The SISE head (SISE paper): ``Linear(d, 256) → ReLU → Linear(256, 128) → L2-normalise``.

It has ``256·d + 256 + 128·256 + 128 = 256·d + 33,152`` parameters and is trained on cached
embeddings with the supervised contrastive loss at temperature ``τ = 0.07`` (Adam, lr 1e-3, weight
decay 1e-5, batch 512, 60 epochs, reshuffled every epoch: :class:`~embedcheck.heads.params.MLPParams`).
Every head reads **unit rows** (the input is L2-normalised first) and writes unit rows. ``torch`` is
imported inside :func:`train_mlp` only.

>>> mlp_param_count(384), mlp_param_count(768)
(131456, 229760)
"""

from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..rows import unit_rows
from .base import EpochCallback, Head, TrainResult, _base_config, _summary, head_codes
from .params import MLPParams
from .supcon import supcon_loss


def mlp_param_count(d: int, hidden: int = 256, out: int = 128) -> int:
    """Parameters of ``Linear(d, hidden) → ReLU → Linear(hidden, out)``: ``256·d + 33,152`` by default.

    >>> mlp_param_count(2560)
    688512
    """
    return hidden * d + hidden + out * hidden + out


def train_mlp(X: np.ndarray, labels: np.ndarray, params: MLPParams = MLPParams(), *,
              on_epoch: Optional[EpochCallback] = None, summarize: bool = True) -> TrainResult:
    """Train the SISE head with SupCon on cached embeddings (rows L2-normalised first).

    Deterministic: ``torch.manual_seed(seed)`` (inside ``fork_rng``, the caller's RNG state is
    kept) for the initialisation and a ``numpy.random.default_rng(seed)`` permutation per epoch.
    Same inputs and seed → the same weights, bit for bit, whatever the thread count (tested for
    1, 2 and 3 threads), so ``threads=None`` picks the free cores (one thread for small inputs),
    the count is restored afterwards and is not recorded in the head. OpenMP workers wait
    passively (``OMP_WAIT_POLICY=PASSIVE`` before torch loads): a busy machine does not make them spin. The last batch of an epoch may be smaller than ``batch_size``;
    a batch in which no row has a positive is skipped (no optimiser step).
    """
    from ..engine.threads import choose_threads, passive_wait

    passive_wait()
    import torch

    n, d = X.shape
    p = params
    hidden_dim, out_dim, temperature, lr = p.hidden_dim, p.out_dim, p.temperature, p.lr
    weight_decay, batch_size, epochs, seed, threads = p.weight_decay, p.batch_size, p.epochs, p.seed, p.threads
    classes, codes = head_codes(labels, n)
    U = unit_rows(X, dtype=np.float32)
    t0 = time.perf_counter()
    if threads is None:  # below ~32 rows x 384 dims per batch a second thread only costs
        threads = choose_threads(None, work=min(batch_size, n) * d, min_work_per_thread=32 * 384)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    losses: list[float] = []
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = torch.nn.Sequential(torch.nn.Linear(d, hidden_dim), torch.nn.ReLU(),
                                        torch.nn.Linear(hidden_dim, out_dim))
        from ..engine.threads import quiet_torch_cache

        quiet_torch_cache()  # the optimiser imports torch._dynamo: no torchinductor folder left in the temp dir
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        Ut = torch.from_numpy(U)
        yt = torch.from_numpy(codes)
        rng = np.random.default_rng(seed)
        for epoch in range(epochs):
            perm = torch.from_numpy(rng.permutation(n))
            total, anchors = 0.0, 0
            for start in range(0, n, batch_size):
                idx = perm[start:start + batch_size]
                z = torch.nn.functional.normalize(model(Ut[idx]), dim=1)
                loss, used = supcon_loss(z, yt[idx], temperature)
                if used == 0:
                    continue
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * used
                anchors += used
            if anchors == 0:
                raise InputError(f"no batch of {batch_size} rows held two rows with the same label; "
                                 "increase --batch-size (SupCon needs positives)")
            losses.append(total / anchors)
            if on_epoch is not None:
                on_epoch(epoch, losses[-1])
        weights = dict(model.named_parameters())  # "0.weight", "0.bias", "2.weight", "2.bias"
        tensors = {name: weights[key].detach().numpy().astype(np.float32).copy()
                   for name, key in (("fc1.weight", "0.weight"), ("fc1.bias", "0.bias"),
                                     ("fc2.weight", "2.weight"), ("fc2.bias", "2.bias"))}
    finally:
        torch.set_num_threads(old_threads)
    seconds = time.perf_counter() - t0
    hp = {**{k: v for k, v in p.to_dict().items() if k != "threads"}, "loss": "supcon (Khosla et al. 2020, L_out)", "optimizer": "adam"}
    head = Head("mlp", tensors, _base_config("mlp", d, out_dim, classes, hp, hidden_dim=hidden_dim))
    summary: dict[str, Any] = {
        "n_rows": int(n),
        "parameters": head.n_params,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
    }
    if summarize:
        summary.update(_summary(U, codes, head, seed))
    head.config["summary"] = summary
    return TrainResult(head, losses, seconds, summary)
