"""A convolution's dimensionality against the CANN contract: the product columns of
aclnnConvolution's constraint table that leave out a dimensionality (3-D on 310B) or limit one
to some dtypes (3-D float16 only on 310P), applied to traced calls by the length of their
stride/padding/dilation lists."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from opcheck.checker.check import Restriction
from opcheck.core.oplist import Signature
from opcheck.core.products import product_names, product_rank
from opcheck.db.contract import FunctionDoc, cann_dtype

# the arguments whose length is the number of spatial dimensions of a convolution call
_SPATIAL_ARGS = ("stride", "padding", "dilation")
# what to do instead, per kind of rejection
_DIMS_FIX = {
    "dims": "run it as a matmul/Linear over the flattened patches (kernel == stride), or "
            "on another product",
    "dims_dtype": "cast its inputs to float16, or run it as a matmul/Linear over the "
                  "flattened patches (kernel == stride)",
}


def spatial_dims(sig: Signature) -> int | None:
    """The number of spatial dimensions of a convolution call (3: Conv3D), from the length of
    its stride/padding/dilation lists; None when the call recorded none of them."""
    for name in _SPATIAL_ARGS:
        value = sig.args.get(name)
        if isinstance(value, list) and value:
            return len(value)
    return None


@dataclass(frozen=True)
class DimsFailure:
    """Calls of ``dims`` spatial dimensions a constraint line rejects on ``products``."""

    kind: str  # dims (the dimensionality is not supported) | dims_dtype (not in this dtype)
    dims: int
    products: tuple[str, ...]
    dtypes: tuple[str, ...]  # dims_dtype: the calls' dtypes outside the limit
    limit: str  # the constraint's value: the dimensionalities, or the dtypes, it allows
    line: int


def judge_dims(doc: FunctionDoc, calls: Iterable[Signature],
               products: Sequence[str]) -> list[DimsFailure]:
    """The calls a product's convolution-dimensionality constraints reject: a dimensionality
    the product's column leaves out (``dims``), or a dtype outside the ones a dimensionality
    is limited to (``dims_dtype``). Calls without stride/padding/dilation are not judged."""
    kinds = [c for c in doc.constraints if c.kind in ("dims", "dims_dtype")]
    seen: dict[int, set[str]] = {}  # spatial dims → CANN dtypes of the calls' tensors
    for sig in calls if kinds else ():
        n = spatial_dims(sig)
        if n is not None:
            seen.setdefault(n, set()).update(
                t for v in sig.inputs.values() for d in v.split(",")
                if (t := cann_dtype(d.strip())))
    cases: dict[tuple[str, int, int, tuple[str, ...], str], list[str]] = {}
    for n, dtypes in sorted(seen.items()):
        for product in products:
            for c in kinds:
                if product not in c.products:
                    continue
                if c.kind == "dims" and str(n) not in c.value.split(","):
                    cases.setdefault(("dims", n, c.line, (), c.value), []).append(product)
                elif c.kind == "dims_dtype" and c.subject == f"{n}D":
                    bad = tuple(sorted(d for d in dtypes if d not in c.value.split(",")))
                    if bad:
                        cases.setdefault(("dims_dtype", n, c.line, bad, c.value),
                                         []).append(product)
    # the same statement in two rows of a column (bias's and the general one): said once, at
    # its first line
    out: dict[tuple[str, int, tuple[str, ...], tuple[str, ...], str], DimsFailure] = {}
    for (kind, n, line, bad, limit), failing in cases.items():
        products_ = tuple(sorted(dict.fromkeys(failing), key=product_rank))
        out.setdefault((kind, n, products_, bad, limit),
                       DimsFailure(kind, n, products_, bad, limit, line))
    return list(out.values())


def dims_restrictions(doc: FunctionDoc, calls: Sequence[Signature], products: Sequence[str],
                      basis: str, dtype_error: Callable[[], str], *,
                      inferred: bool) -> list[Restriction]:
    """:func:`judge_dims` as restrictions: what the user would see, where, and the fix.
    ``dtype_error`` reads the return code the function's docs give for a rejected dtype (a
    catalog read, done only for a rejection that has one)."""
    out: list[Restriction] = []
    for f in judge_dims(doc, calls, products):
        ok = tuple(sorted((p for p in products if p not in f.products), key=product_rank))
        said = (f"{f.dims}-D convolution is not supported on {product_names(f.products)} (the docs "
                f"support {', '.join(d + 'D' for d in f.limit.split(','))} there)"
                if f.kind == "dims" else
                f"{f.dims}-D convolution accepts only {f.limit.replace(',', ', ')} on "
                f"{product_names(f.products)}; the call has {', '.join(f.dtypes)}")
        # the return codes name no dimensionality: a shape code would be a guess
        error = dtype_error() if f.kind == "dims_dtype" else ""
        out.append(Restriction(
            doc.function,
            f"{doc.function}: {said}" + (f"; fine on {product_names(ok)}" if ok else "")
            + (f" (the call returns {error})" if error else "")
            + f"; fix: {_DIMS_FIX[f.kind]} — {basis}",
            f.dtypes, doc.url(f.line), ",".join(f.products), unsupported=f.kind == "dims",
            inferred=inferred, source="cann", param="input" if f.dtypes else "",
            products_failing=f.products, products_fine=ok, error=error, basis=basis))
    return out
