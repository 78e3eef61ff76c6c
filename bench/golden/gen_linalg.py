"""PyTorch 2.15's results for the samples of torchfn's linalg decompositions
(runtime/src/ops/decompositions.rs builds the same inputs): each function's outputs and the
gradient of sum_k sum(out_k * w_k) with w_k = cos(arange(numel) + k) shaped like out_k, for
every input. Singular and eigen vectors are brought to torchfn's sign convention first (each
column's entry of largest magnitude positive; U's columns set the pairs' signs).

    python bench/golden/gen_linalg.py > tests/golden/linalg.json
"""

import json

import torch

torch.set_default_dtype(torch.float64)


def square(batch, n):
    count = 1
    for b in batch:
        count *= b
    count *= n * n
    data = []
    for i in range(count):
        row, col = (i // n) % n, i % n
        v = (((i * 7 + 3) % 11) - 5.0) / 4.0
        data.append(v + 4.0 + row if row == col else v)
    return torch.tensor(data).reshape(*batch, n, n)


def values(shape):
    """torchfn.testing.values as float32: varied, nonzero."""
    n = 1
    for d in shape:
        n *= d
    data = []
    for i in range(n):
        k = (i * 7 + 3) % 11
        data.append((k - 5.0) / 2.0 + (1.5 if k == 5 else 0.0))
    return torch.tensor(data, dtype=torch.float32).reshape(shape)


def spd(batch, n):
    m = square(batch, n)
    return m @ m.mT + torch.eye(n) * n


def rectangular(m, n):
    data = []
    for i in range(m * n):
        row, col = i // n, i % n
        data.append((((i * 7 + 3) % 11) - 5.0) / 3.0 + (2.0 + row if row == col else 0.0))
    return torch.tensor(data).reshape(m, n)


def lead_sign(x):
    """+1 or -1 per column: the sign of the column's entry of largest magnitude (first of equals)."""
    idx = x.abs().argmax(dim=-2, keepdim=True)
    return torch.where(torch.gather(x, -2, idx) < 0, -1.0, 1.0)


def svd(a, full_matrices=True):
    u, s, vh = torch.linalg.svd(a, full_matrices=full_matrices)
    k = s.shape[-1]
    su = lead_sign(u)
    u = u * su
    v = vh.mT
    sv = torch.cat([su[..., :k], lead_sign(v)[..., k:]], -1) if v.shape[-1] > k else su[..., :k]
    return u, s, (v * sv).mT


def eigh(a, UPLO="L"):
    l, v = torch.linalg.eigh(a, UPLO=UPLO)
    return l, v * lead_sign(v)


def slogdet(a):
    return tuple(torch.linalg.slogdet(a))


def qr(a, mode="reduced"):
    return tuple(torch.linalg.qr(a, mode=mode))


CASES = [
    ("torchfn.linalg.det", [square([], 3)], {}, torch.linalg.det),
    ("torchfn.linalg.det", [square([2], 2)], {}, torch.linalg.det),
    ("torchfn.linalg.slogdet", [square([], 3)], {}, slogdet),
    ("torchfn.linalg.slogdet", [square([2], 3)], {}, slogdet),
    ("torchfn.linalg.inv", [square([], 3)], {}, torch.linalg.inv),
    ("torchfn.linalg.inv", [square([2], 2)], {}, torch.linalg.inv),
    ("torchfn.linalg.solve", [square([], 3), rectangular(3, 2)], {}, torch.linalg.solve),
    ("torchfn.linalg.solve", [square([2], 3), rectangular(3, 1).squeeze(-1)], {}, torch.linalg.solve),
    ("torchfn.linalg.solve", [square([], 2), rectangular(3, 2)], {"left": False}, torch.linalg.solve),
    ("torchfn.linalg.cholesky", [spd([], 3)], {}, torch.linalg.cholesky),
    ("torchfn.linalg.cholesky", [spd([2], 2)], {"upper": True}, torch.linalg.cholesky),
    ("torchfn.linalg.qr", [rectangular(4, 3)], {}, qr),
    ("torchfn.linalg.qr", [square([], 3)], {"mode": "complete"}, qr),
    ("torchfn.linalg.qr", [rectangular(2, 4)], {}, qr),
    ("torchfn.linalg.svd", [rectangular(4, 3), False], {}, svd),
    ("torchfn.linalg.svd", [rectangular(2, 3), False], {}, svd),
    ("torchfn.linalg.svdvals", [rectangular(4, 3)], {}, torch.linalg.svdvals),
    ("torchfn.linalg.svdvals", [square([2], 3)], {}, torch.linalg.svdvals),
    ("torchfn.linalg.eigh", [spd([], 3)], {}, eigh),
    ("torchfn.linalg.eigh", [spd([2], 2)], {"UPLO": "U"}, eigh),
    ("torchfn.linalg.eigvalsh", [spd([], 4)], {}, torch.linalg.eigvalsh),
    ("torchfn.linalg.lstsq", [rectangular(4, 3), rectangular(4, 2)], {}, lambda a, b: tuple(torch.linalg.lstsq(a, b))),
    ("torchfn.linalg.lstsq", [rectangular(2, 3), rectangular(2, 1).squeeze(-1)], {},
     lambda a, b: tuple(torch.linalg.lstsq(a, b))),
    ("torchfn.linalg.lstsq", [rectangular(4, 2), rectangular(4, 1)], {"driver": "gelsd"},
     lambda a, b, driver: tuple(torch.linalg.lstsq(a, b, driver=driver))),
    # The matrix norms of singular values (samples 3 to 5 of matrix_norm).
    ("torchfn.linalg.matrix_norm", [values([3, 3]), 2.0], {}, torch.linalg.matrix_norm, 3),
    ("torchfn.linalg.matrix_norm", [values([2, 2, 3]), "nuc"], {"keepdim": True}, torch.linalg.matrix_norm, 4),
    ("torchfn.linalg.matrix_norm", [values([3, 2]), -2.0], {}, torch.linalg.matrix_norm, 5),
]


def flat(t):
    return {"shape": list(t.shape), "data": [float(v) for v in t.detach().reshape(-1).tolist()]}


def main():
    out = []
    counts = {}
    for func, args, kwargs, f, *at in CASES:
        index = at[0] if at else counts.get(func, 0)
        counts[func] = index + 1
        inputs = [a.clone().requires_grad_(True) if isinstance(a, torch.Tensor) else a for a in args]
        result = f(*inputs, **kwargs)
        outs = list(result) if isinstance(result, tuple) else [result]
        total = 0
        for k, o in enumerate(outs):
            if o.requires_grad:
                w = torch.cos(torch.arange(o.numel(), dtype=torch.float64) + k).reshape(o.shape).to(o.dtype)
                total = total + (o * w).sum()
        tensors = [a for a in inputs if isinstance(a, torch.Tensor)]
        grads = torch.autograd.grad(total, tensors)
        out.append({"func": func, "sample": index, "outputs": [flat(o) for o in outs],
                    "grads": [flat(g) for g in grads]})
    print(json.dumps({"reference": f"PyTorch {torch.__version__}", "cases": out}))


main()
