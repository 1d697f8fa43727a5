"""``embedcheck.probe``: is the attribute linearly readable? — the report of ``embedcheck probe``."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ..report.result import Figure, Report
from ..report.schemas import BOOL, COUNTS, INT, NUM, NUM_OR_NULL, PERCENT, obj
from ..rows import content_sha256
from ..spec import Option, takes
from ._common import check_not_swapped, check_same_rows, in_order, label_of, labels_for, matrix


class ProbeReport(Report):
    """The ``probe`` report; ``results["probe"]`` holds the fitted result (per-row correctness
    included, for paired comparisons)."""

    command = "probe"
    report_schema = obj({
        "accuracy": NUM, "macro_f1": NUM, "majority_baseline": NUM, "n_train": INT, "n_test": INT,
        "train_per_class": COUNTS, "test_per_class": COUNTS, "standardized": BOOL, "C": NUM,
        "max_iter": INT, "converged": BOOL,
        "few_shot": obj({"shots": INT, "repeats": INT, "seed": INT, "accuracy_mean": NUM, "accuracy_sd": NUM_OR_NULL,
                         "macro_f1_mean": NUM, "macro_f1_sd": NUM_OR_NULL}),
    }, optional=("few_shot",))
    figures = {
        "accuracy": Figure("higher", interval="accuracy_ci95", reference="majority_baseline", help="test accuracy x100 of a logistic-regression probe; read against the majority class", unit=PERCENT, range=(0, 100)),
        "macro_f1": Figure("higher", interval="macro_f1_ci95", help="macro-averaged F1 x100 of the probe on the test rows", unit=PERCENT, range=(0, 100)),
        "few_shot.accuracy_mean": Figure("higher", reference="majority_baseline", help="mean accuracy x100 of probes trained on a few rows per class", unit=PERCENT, range=(0, 100)),
        "few_shot.macro_f1_mean": Figure("higher", help="mean macro F1 x100 of the few-shot probes", unit=PERCENT, range=(0, 100)),
    }


@takes(
    Option("C", float, 1.0, "Inverse regularisation strength of LogisticRegression.", min=1e-12),
    Option("max_iter", int, 1000, "LogisticRegression max_iter.", min=1),
    Option("standardize", bool, False, "Standardise features (StandardScaler fitted on train) before the probe."),
    Option("shots", int, None, "Few-shot: K training rows per class per draw.", min=1),
    Option("repeats", int, 10, "Few-shot: number of seeded draws.", min=1),
    Option("resamples", int, 1000, "Resamples of the 95% intervals of accuracy and macro-F1 (bootstrap over test "
           "rows); 0: none.", min=0),
)
def probe(train: Any, train_labels: Any, test: Any, test_labels: Any, *, label_field: str = "label", C: float = 1.0,
          max_iter: int = 1000, standardize: bool = False, shots: Optional[int] = None, repeats: int = 10,
          resamples: int = 1000, seed: int = 0, against: Optional[Sequence[Any]] = None,
          margins: Optional[dict[str, float]] = None) -> ProbeReport:
    """Logistic-regression probe fitted on ``train`` and scored on ``test`` (arrays or files):
    accuracy x100 and macro-F1 x100 with 95 % intervals (bootstrap over test rows), the majority
    baseline; with ``shots``, the few-shot mean and sd over ``repeats`` seeded draws.

    ``against`` = (B_train, B_test): a second embedding of the same training and test rows (ids
    checked from the sidecars); a probe with the same settings is fitted on B and the report
    gains ``paired``: accuracy and macro-F1 of A and B on the same resampled test rows, their
    difference with its 95 % interval, p-value, minimum detectable effect and verdict at
    ``margins`` (figure → margin, x100 units). The few-shot figures are not paired."""
    from ..errors import InputError
    from ..geometry import probe as _probe
    from ..io.npy import check_same_dim

    check_not_swapped(train, train_labels, "TRAIN", "TRAIN_LABELS")
    check_not_swapped(test, test_labels, "TEST", "TEST_LABELS")
    Xtr = matrix(train, "train embeddings", need_direction=False)
    matched: dict[str, str] = {}
    ytr = labels_for(train_labels, Xtr.shape[0], label_field, "train labels", rows=train, matched=matched,
                     key="train_labels")
    Xte = matrix(test, "test embeddings", need_direction=False)
    yte = labels_for(test_labels, Xte.shape[0], label_field, "test labels", rows=test, matched=matched,
                     key="test_labels")
    check_same_dim(Xtr, Xte, label_of(train, "train"), label_of(test, "test"))
    if (ytr.dtype.kind == "U") != (yte.dtype.kind == "U"):
        kinds = {True: "strings", False: "ints"}
        raise InputError(f"train labels {train_labels} are {kinds[ytr.dtype.kind == 'U']} but test labels "
                         f"{test_labels} are {kinds[yte.dtype.kind == 'U']}; use the same label kind for both")
    if against is not None:
        from ..stats.items import check_margins

        if len(against) != 2:
            raise InputError(f"against must be two embeddings (B_train, B_test), got {len(against)}")
        check_margins(margins, ["accuracy", "macro_f1"])
        if resamples < 2:
            raise InputError("against needs resamples >= 2 (the paired bootstrap)")
        Btr = matrix(against[0], "against B_train", need_direction=False)
        Bte = matrix(against[1], "against B_test", need_direction=False)
        Btr = in_order(Btr, check_same_rows(train, against[0], Xtr.shape[0], Btr.shape[0], ("TRAIN", "against B_train")), "against B_train")
        Bte = in_order(Bte, check_same_rows(test, against[1], Xte.shape[0], Bte.shape[0], ("TEST", "against B_test")), "against B_test")
        check_same_dim(Btr, Bte, label_of(against[0], "B_train"), label_of(against[1], "B_test"))
    full = _probe.fit_probe(Xtr, ytr, Xte, yte, C=C, max_iter=max_iter, standardize=standardize, seed=seed,
                            resamples=resamples)
    body = full.to_dict()
    results: dict[str, Any] = {"probe": full}
    if not full.converged:
        body["warning"] = f"LogisticRegression did not converge in {max_iter} iterations; raise --max-iter"
    if shots is not None:
        fs = _probe.few_shot(Xtr, ytr, Xte, yte, shots=shots, repeats=repeats, seed=seed,
                             C=C, max_iter=max_iter, standardize=standardize)
        body["few_shot"] = fs.to_dict()
        results["few_shot"] = fs
    from ._common import store_models

    models = store_models(train=train, test=test, **({"against_train": against[0], "against_test": against[1]}
                                                     if against is not None and len(against) == 2 else {}))
    if models:
        body["models"] = models
    body["inputs"] = {"train_labels_sha256": content_sha256(ytr), "test_labels_sha256": content_sha256(yte),
                      "rows_matched_by": matched}
    if against is not None:
        import numpy as np

        from ..geometry.probe import probe_paired

        fb = _probe.fit_probe(Btr, ytr, Bte, yte, C=C, max_iter=max_iter, standardize=standardize, seed=seed)
        assert full.predictions is not None and fb.predictions is not None
        if not fb.converged:
            body["warning"] = " ".join(filter(None, [body.get("warning"), f"B's LogisticRegression did not converge "
                                                                             f"in {max_iter} iterations; raise --max-iter"]))
        paired = probe_paired(yte, full.predictions, fb.predictions, np.unique(np.concatenate([ytr, yte])),
                              resamples=resamples, permutations=resamples, seed=seed, margins=margins,
                              against=" ".join(label_of(x, "array") for x in against))
        body["paired"] = paired.to_dict()
        results.update(paired=paired, probe_b=fb)
    return ProbeReport(body=body, results=results)
