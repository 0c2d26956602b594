"""The benchmark harness's float64 re-checks (tools/bench/suites/reductions.py): a result that
differs from torch's is accepted only when it is a valid answer of the rule in float64."""

import pytest

torch = pytest.importorskip("torch")

from tools.bench.suites.reductions import router_rows_bad, sample_draw_bad  # noqa: E402


def _draw(x, r, topp, topk, temp):
    """The rule in float64: stable sort, cumsum of exp, first position reaching the limit."""
    s, order = torch.sort(x.double(), descending=True, stable=True)
    cum = torch.cumsum(torch.exp((s - s[0]) / temp), 0)
    kp = min(topk, x.numel())
    limit = r * torch.minimum(cum[kp - 1], topp * cum[-1])
    pos = int(torch.searchsorted(cum, limit.reshape(1)).clamp_(max=kp - 1))
    return order, pos


@pytest.mark.parametrize("rt", [(0.95, 1.0, 10**9, 1.0), (0.5, 0.8, 50, 0.7), (0.999, 1.0, 7, 1.3)])
def test_sample_draw_bad(rt):
    g = torch.Generator().manual_seed(5)
    x = torch.rand(4099, generator=g, dtype=torch.float64) * 16 - 8
    x[100] = x[101]  # a tie
    r, topp, topk, temp = rt
    order, pos = _draw(x, r, topp, topk, temp)
    assert sample_draw_bad(torch, x, order[pos], *rt) == ""
    # positions far from the crossing are caught, as are indices out of range
    far = order[max(0, pos - 40)] if pos >= 40 else order[min(pos + 40, x.numel() - 1)]
    if int(far) != int(order[pos]):
        assert sample_draw_bad(torch, x, far, r, topp, 10**9, temp, rtol=1e-9) != ""
    assert "outside" in sample_draw_bad(torch, x, x.numel(), *rt)
    # the neighbour of the crossing passes only with a tolerance that covers its term
    nxt = order[min(pos + 1, x.numel() - 1)]
    if pos + 1 < min(topk, x.numel()):
        assert sample_draw_bad(torch, x, nxt, *rt, rtol=1e-12) != ""
        assert sample_draw_bad(torch, x, nxt, *rt, rtol=1.0) == ""


def test_router_rows_bad():
    g = torch.Generator().manual_seed(3)
    n, k, scale = 64, 8, 2.5
    x = torch.randn(n, 256, generator=g)
    b = torch.rand(256, generator=g) * 0.2 - 0.1
    s = torch.sigmoid(x.double())
    c = (s + b.double()).view(n, 8, 32)
    keep = torch.zeros(n, 8, dtype=torch.bool).scatter_(1, c.topk(2, dim=-1).values.sum(-1).topk(4, dim=-1).indices, True)
    c = torch.where(keep[:, :, None], c, torch.zeros_like(c)).view(n, 256)
    idx = c.topk(k, dim=-1).indices
    v = torch.gather(s, 1, idx)
    vals = (v / v.sum(-1, keepdim=True) * scale).float()
    assert router_rows_bad(torch, x, b, vals, idx.int(), scale) == 0
    swapped = idx.clone()
    swapped[0, 0] = (swapped[0, 0] + 32 * 4) % 256  # an expert of another group, likely dropped
    wrong = vals.clone()
    wrong[1, 0] += 0.1
    assert router_rows_bad(torch, x, b, vals, swapped.int(), scale) >= 1
    assert router_rows_bad(torch, x, b, wrong, idx.int(), scale) == 1
