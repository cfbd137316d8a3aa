"""The classifiers and t-tests of dataset inference (studies/dataset_inference.py): an
L2-penalised logistic regression fitted with non-negative weights (pddkit's default) or
without bounds (the paper's), and the one-sided t-test of the held-out scores (Welch's or
Student's). Deterministic, numbers only."""

from __future__ import annotations

import numpy as np


def _logistic_objective(X: np.ndarray, y: np.ndarray, C: float):
    """scikit-learn's L2-penalised logistic loss in (weights, intercept) = theta: C * log-loss
    summed over rows + ||w||^2 / 2, intercept not penalised; (loss, gradient, sigmoid)."""
    F = X.shape[1]

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        w, b = theta[:F], theta[F]
        z = X @ w + b
        # log(1 + exp(-z)) for y = 1, log(1 + exp(z)) for y = 0
        loss = C * float(np.sum(np.logaddexp(0.0, np.where(y > 0, -z, z)))) + 0.5 * float(w @ w)
        s = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid(z), overflow-free
        r = C * (s - y)
        return loss, np.r_[X.T @ r + w, r.sum()], s

    return objective


def fit_nonnegative(X: np.ndarray, y: np.ndarray, C: float = 1.0) -> tuple[np.ndarray, float]:
    """(weights, intercept) of an L2-penalised logistic regression (scikit-learn's objective:
    C * log-loss summed over rows + ||w||^2 / 2, intercept not penalised) with every weight
    constrained to be >= 0, deterministic. L-BFGS-B from zero with the exact gradient finds
    which weights the constraint holds at 0; Newton's method on the others
    (`fit_unconstrained` on their columns) then takes the fit to the optimum within
    rounding, which L-BFGS-B alone stops short of (its relative loss tolerance ends it some
    1e-8 away). The polished fit is kept when it satisfies the optimality (KKT) conditions:
    every free weight >= 0 and a gradient >= 0 on every weight held at 0; otherwise the
    L-BFGS-B answer stands."""
    from scipy.optimize import minimize

    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    F = X.shape[1]
    objective = _logistic_objective(X, y, C)
    res = minimize(lambda th: objective(th)[:2], np.zeros(F + 1), jac=True, method="L-BFGS-B",
                   bounds=[(0.0, None)] * F + [(None, None)],
                   options={"maxiter": 1000, "gtol": 1e-8, "ftol": 1e-12})
    w, b = np.maximum(res.x[:F], 0.0), float(res.x[F])
    free = w > 0
    if free.any():
        w_free, b_new = fit_unconstrained(X[:, free], y, C)
    else:  # the intercept alone: log-odds of the labels (a label missing: L-BFGS-B's)
        share = y.mean()
        w_free, b_new = np.zeros(0), (float(np.log(share / (1 - share))) if 0 < share < 1
                                      else b)
    polished = np.zeros(F)
    polished[free] = w_free
    grad = objective(np.r_[polished, b_new])[1]
    if (w_free >= 0).all() and (grad[:F][~free] >= 0).all():
        return polished, float(b_new)
    return w, b


def fit_unconstrained(X: np.ndarray, y: np.ndarray, C: float = 1.0,
                      max_iter: int = 100) -> tuple[np.ndarray, float]:
    """(weights, intercept) of the same L2-penalised logistic regression as `fit_nonnegative`
    without bounds (the paper's linear classifier; the penalty keeps the weights finite when
    the halves are separable): Newton's method with backtracking from zero, deterministic,
    to the optimum within rounding (the objective is strictly convex). Near the optimum the
    loss no longer resolves a Newton step's decrease (it is below the loss's rounding), so
    a step is also taken when the loss does not rise beyond its rounding and the gradient
    shrinks; the fit ends when neither the loss nor the gradient can be lowered."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    F = X.shape[1]
    X1 = np.column_stack([X, np.ones(len(X))])
    penalty = np.r_[np.ones(F), 0.0]
    objective = _logistic_objective(X, y, C)
    theta = np.zeros(F + 1)
    loss, grad, s = objective(theta)
    for _ in range(max_iter):
        hessian = C * (X1.T * (s * (1.0 - s))) @ X1 + np.diag(penalty)
        step = np.linalg.solve(hessian, grad)
        decrease = float(grad @ step)
        if decrease <= 1e-24 * max(1.0, abs(loss)):
            break
        rounding = 64 * np.finfo(np.float64).eps * max(1.0, abs(loss))
        t, taken = 1.0, False
        while t >= 1e-12:  # Armijo backtracking; a Newton step near the optimum is taken whole
            new = theta - t * step
            new_loss, new_grad, new_s = objective(new)
            if new_loss <= loss - 1e-4 * t * decrease or (
                    new_loss <= loss + rounding and new_grad @ new_grad < grad @ grad):
                taken = True
                break
            t *= 0.5
        if not taken:  # neither the loss nor the gradient goes lower: the optimum within rounding
            break
        theta, loss, grad, s = new, new_loss, new_grad, new_s
    return theta[:F].copy(), float(theta[F])


def t_test_greater(suspect_scores: np.ndarray, reference_scores: np.ndarray,
                   equal_var: bool = False) -> tuple[float, float]:
    """(t, p) of the one-sided t-test that suspect scores are higher: Welch's, or Student's
    with `equal_var`; p = 1 when neither set's scores vary (no evidence of a difference)."""
    from scipy.stats import ttest_ind

    if np.ptp(suspect_scores) == 0 and np.ptp(reference_scores) == 0:
        return 0.0, 1.0
    t, p = ttest_ind(suspect_scores, reference_scores, equal_var=equal_var,
                     alternative="greater")
    return (float(t), float(p)) if np.isfinite(p) else (0.0, 1.0)


def welch_greater(suspect_scores: np.ndarray, reference_scores: np.ndarray) -> tuple[float, float]:
    """(t, p) of the one-sided Welch t-test that suspect scores are higher."""
    return t_test_greater(suspect_scores, reference_scores, equal_var=False)
