"""The supervised contrastive loss (Khosla et al. 2020) the SISE head is trained with (torch).
"""

from __future__ import annotations

from typing import Any


def supcon_loss(z: Any, labels: Any, temperature: float = 0.07) -> tuple[Any, int]:
    """Supervised contrastive loss ``L_out`` of Khosla et al. (2020), eq. 2.

    For unit rows ``z`` and anchors ``i`` with positives ``P(i) = {p ≠ i: y_p = y_i}`` and
    ``A(i) = {a ≠ i}``::

        L = mean_{i: |P(i)|>0}  −1/|P(i)| Σ_{p∈P(i)} log( exp(z_i·z_p/τ) / Σ_{a∈A(i)} exp(z_i·z_a/τ) )

    Anchors with no positive in the batch contribute nothing (they are left out of the mean);
    a batch without any such anchor gives a zero loss (still differentiable, zero gradient).
    Returns ``(loss, number of anchors used)``. Never NaN: the self-similarity is masked
    with a finite ``-1e9``, not ``-inf``. Two choices differ from the authors' reference code and
    are deliberate: anchors without positives are excluded from the mean (the reference averages
    them in as zeros), and the loss is not rescaled by ``τ/0.07`` (identical at the default τ).
    """
    import torch

    n = z.shape[0]
    logits = (z @ z.T) / temperature
    eye = torch.eye(n, dtype=torch.bool, device=z.device)
    logits = logits.masked_fill(eye, -1e9)
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    pos = (labels[:, None] == labels[None, :]) & ~eye
    n_pos = pos.sum(dim=1)
    valid = n_pos > 0
    n_valid = int(valid.sum())
    if n_valid == 0:
        return z.sum() * 0.0, 0
    per_anchor = torch.where(pos, log_prob, torch.zeros_like(log_prob)).sum(dim=1)
    loss = -(per_anchor[valid] / n_pos[valid]).mean()
    return loss, n_valid
