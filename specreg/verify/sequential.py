"""Early stopping: a group-sequential test on the counter deltas, look by look.

A run is planned for N prompts in K chunks, as before. After the chunk that completes each tenth
of them, from the third chunk on (a look), every gated metric's estimate so far and its standard error over the chunks so far (a
t-statistic with chunks - 1 degrees of freedom, `stats.Statistics.standard_errors`) give an
interval `estimate ± c_j × se`. The entry's verdict is decided at that look when every check's
interval lies inside one verdict region (no bound of it inside the interval), or one check's
interval lies wholly below its floor or band (regressed, whatever the others say); then the run
stops. The last look (all N prompts) is today's fixed-count test unchanged: each estimate against
its bounds.

The critical values spend ALPHA_EARLY of error over the early looks with Lan-DeMets' Pocock-type
spending function, alpha(t) = ALPHA_EARLY ln(1 + (e - 1) t) at information fraction t = prompts
done / planned (it spends early, where a clear regression is seen), look j spending
alpha(t_j) - alpha(t_{j-1}), two-sided, as the tail of Student's t with chunks - 1 degrees of
freedom (a Bonferroni bound: no correlation between looks is assumed, so it is conservative). A
wrong early verdict at a true value on one side of a bound needs the interval to lie wholly on the
other side: its probability over all early looks is at most ALPHA_EARLY / 2, whatever the true
value. docs/verify.md gives the error rates, measured by tests/test_verify_sequential.py.
"""

from __future__ import annotations

import math
from functools import lru_cache

#: the error the early looks may spend in all (two-sided); the last look is the fixed-count test
ALPHA_EARLY = 0.002
#: the first look is after this many chunks: a standard error needs chunks - 1 >= 2 degrees of freedom
FIRST_LOOK = 3
#: a look per tenth of the planned prompts (after the chunk that completes it), whatever the chunks
LOOKS = 10
#: below this a look's share of the error is too small to resolve: it never stops the run
_TINY = 1e-12


def spent(t: float, alpha: float = ALPHA_EARLY) -> float:
    """The error spent by information fraction t (0-1): Pocock type (Lan & DeMets 1983)."""
    return alpha * math.log(1 + (math.e - 1) * min(max(t, 0.0), 1.0))


def t_two_sided_tail(x: float, df: int) -> float:
    """P(|T| > x) for Student's t with integer df (the closed series of Abramowitz & Stegun 26.7.3-4)."""
    if x <= 0:
        return 1.0
    theta = math.atan(x / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for i in range(1, (df - 1) // 2):
            term *= c2 * (2 * i) / (2 * i + 1)
            total += term
        inside = (2 / math.pi) * (theta + (s * math.cos(theta) * total if df > 1 else 0.0))
    else:
        term, total = 1.0, 1.0
        for i in range(1, df // 2):
            term *= c2 * (2 * i - 1) / (2 * i)
            total += term
        inside = s * total
    return max(0.0, 1.0 - inside)


@lru_cache(maxsize=4096)
def t_critical(tail: float, df: int) -> float:
    """The x with P(|T_df| > x) = tail (bisection on the closed form); inf for a tail too small to use."""
    if tail < _TINY:
        return math.inf
    lo, hi = 0.0, 1.0
    while t_two_sided_tail(hi, df) > tail:
        hi *= 2
        if hi > 1e12:
            return math.inf
    for _ in range(100):
        mid = (lo + hi) / 2
        if t_two_sided_tail(mid, df) > tail:
            lo = mid
        else:
            hi = mid
    return hi


def critical(done: int, planned: int, previous: int, df: int, alpha: float = ALPHA_EARLY) -> float:
    """The critical value of a look after `done` of `planned` prompts, the previous look having been
    after `previous`: the t quantile of the error this look spends."""
    share = spent(done / planned, alpha) - spent(previous / planned, alpha)
    return t_critical(share, df) if df >= 1 else math.inf


def decided(estimate: float, se: float, c: float, bounds: tuple[float, ...]) -> bool:
    """The interval estimate ± c × se holds none of the bounds that separate the verdict regions."""
    if math.isinf(c):
        return False
    return all(abs(estimate - b) > c * se for b in bounds)


def look_points(planned: int, chunks: int, one_at_a_time: bool) -> list[int]:
    """The prompt counts after which a look is made: the end of the first chunk past each tenth of
    the planned prompts (at most LOOKS - 1 looks, however many chunks), from the FIRST_LOOK-th chunk
    on; never at the end (the run ends there anyway). `one_at_a_time`: a chunk per prompt."""
    from specreg.verify.engines import chunks as split

    sizes = [1] * planned if one_at_a_time else [len(part) for part in split(range(planned), chunks)]
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))][FIRST_LOOK - 1 : -1]
    points = {next((e for e in ends if e * LOOKS >= j * planned), None) for j in range(1, LOOKS)}
    return sorted(p for p in points if p is not None)
