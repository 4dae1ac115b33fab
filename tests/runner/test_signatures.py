"""Reading a plugin callable's keyword parameters."""
from __future__ import annotations

from core.common.signatures import keyword_parameters


class _Model:
    def __init__(self, alpha: int, beta: str = "x", *, gamma: float = 0.0) -> None:
        self.alpha, self.beta, self.gamma = alpha, beta, gamma


def _metric(y_true: list, y_pred: list, **params: object) -> float:
    return 0.0


def test_class_constructor_without_self() -> None:
    takes = keyword_parameters(_Model)
    assert takes.accepted == ("alpha", "beta", "gamma")
    assert takes.required == ("alpha",) and not takes.takes_any


def test_var_keyword_function() -> None:
    takes = keyword_parameters(_metric)
    assert takes.accepted == ("y_true", "y_pred") and takes.takes_any


def test_unreadable_signature_accepts_anything() -> None:
    takes = keyword_parameters(getattr)  # a builtin without a readable signature
    assert takes.accepted == () and takes.required == () and takes.takes_any
