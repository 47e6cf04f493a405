"""The atlas's real-data fallback where the fake trace meets data-dependent code (issue 36):
fused RNN cells (the accelerator path of LSTM and GRU) run on the real-data device, a 0-dim
device tensor formats as its number (module keys made from a routed index), a helper cached
on its arguments during the fake trace does not hand its FakeTensors to the real-data run,
a config value a real run reads as None is not retried on real data, and a narrowed build that
fails on a shape is retried with every layer kept."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from opcheck.core.errors import TraceError
from opcheck.tracers.inputs import InputSpec

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from opcheck.tracers import atlas_hf, atlas_trace, realdevice_host, runtime  # noqa: E402


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_rnn_layers_run_and_are_recorded_on_the_real_data_device(cls: str) -> None:
    torch.manual_seed(0)
    rnn = getattr(torch.nn, cls)(6, 5, batch_first=True)
    x = torch.randn(2, 3, 6)
    want = rnn(x)[0]
    got: list[Any] = []
    rnn.register_forward_hook(lambda _m, _a, out: got.append(out[0].to("cpu")))
    ol = atlas_trace.record_real(rnn, (x,), {}, train=False, label=cls)
    fused = f"aten::_thnn_fused_{cls.lower()}_cell"
    assert fused in {u.op for u in ol.ops}  # what a device without its own RNN kernel gets
    torch.testing.assert_close(got[0], want)  # the CPU kernel computes what torch's cell does


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_rnn_backward_runs_on_the_real_data_device(cls: str) -> None:
    rnn = getattr(torch.nn, cls)(4, 3)
    ol = atlas_trace.record_real(rnn, (torch.randn(5, 2, 4),), {}, train=True, label=cls)
    ops = {u.op for u in ol.ops}
    assert any(op.startswith(f"aten::_thnn_fused_{cls.lower()}_cell_backward") for op in ops)


def _numeric_grads(forward: Any, inputs: list[Any], grads: list[Any]) -> list[Any]:
    """Gradients of sum(out * grad) w.r.t. ``inputs`` by autograd on ``forward``."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    outs = forward(*leaves)
    total = sum((o * g).sum() for o, g in zip(outs, grads, strict=True))
    return list(torch.autograd.grad(total, leaves))


def test_fused_cell_kernels_match_torchs_cells_and_their_own_gradients() -> None:
    torch.manual_seed(1)
    b, h = 3, 4
    lstm = torch.nn.LSTMCell(5, h)
    x, hx, cx = torch.randn(b, 5), torch.randn(b, h), torch.randn(b, h)
    ig, hg = x @ lstm.weight_ih.T, hx @ lstm.weight_hh.T
    hy, cy, ws = realdevice_host.lstm_cell(ig, hg, cx, lstm.bias_ih, lstm.bias_hh)
    want_h, want_c = lstm(x, (hx, cx))
    torch.testing.assert_close((hy, cy), (want_h, want_c))
    ghy, gcy = torch.randn(b, h), torch.randn(b, h)
    gates, gcx, gbias = realdevice_host.lstm_cell_backward(ghy, gcy, cx, cy, ws, True)
    ref_gates, ref_cx = _numeric_grads(lambda g, c: realdevice_host.lstm_cell(g, 0 * hg, c)[:2],
                                       [ig + hg + lstm.bias_ih + lstm.bias_hh, cx], [ghy, gcy])
    torch.testing.assert_close((gates, gcx, gbias), (ref_gates, ref_cx, ref_gates.sum(0)))

    gru = torch.nn.GRUCell(5, h)
    ig, hg = x @ gru.weight_ih.T, hx @ gru.weight_hh.T
    hy, ws = realdevice_host.gru_cell(ig, hg, hx, gru.bias_ih, gru.bias_hh)
    torch.testing.assert_close(hy, gru(x, hx))
    gi, gh, ghx, gbi, gbh = realdevice_host.gru_cell_backward(ghy, ws, True)
    ref_i, ref_h, ref_hx = _numeric_grads(
        lambda i, hh, hxx: realdevice_host.gru_cell(i, hh, hxx)[:1],
        [ig + gru.bias_ih, hg + gru.bias_hh, hx], [ghy])
    torch.testing.assert_close((gi, gh, ghx, gbi, gbh),
                               (ref_i, ref_h, ref_hx, ref_i.sum(0), ref_h.sum(0)))


class _Routed(torch.nn.Module):  # type: ignore[misc,name-defined]
    """Experts in a ModuleDict keyed by a routed index formatted into a string."""

    def __init__(self) -> None:
        super().__init__()
        self.router = torch.nn.Linear(4, 2)
        self.experts = torch.nn.ModuleDict({f"expert_{i}": torch.nn.Linear(4, 4)
                                            for i in range(2)})  # fmt: skip

    def forward(self, x: Any) -> Any:
        idx = self.router(x).sum(0).argmax()
        return self.experts[f"expert_{idx}"](x)


def test_a_0_dim_device_tensor_formats_as_its_number() -> None:
    ol = atlas_trace.record_real(_Routed(), (torch.randn(3, 4),), {}, train=False, label="r")
    ops = {u.op for u in ol.ops}
    assert "aten::_local_scalar_dense" in ops  # the host read the format makes is recorded
    assert "aten::addmm" in ops


@functools.lru_cache(maxsize=4)
def _coords(n: int, device: Any) -> Any:
    return torch.arange(n, dtype=torch.float32, device=device)


class _CachedCoords(torch.nn.Module):  # type: ignore[misc,name-defined]
    """A helper cached by its arguments (size, device), then a branch on a value."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        y = self.proj(x) + _coords(x.shape[-1], x.device)
        if y.sum() > -1e9:  # the fake trace cannot take it: the real-data device does
            return y * 2
        return y


def test_the_real_data_run_does_not_get_the_fake_traces_cached_tensors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _coords.cache_clear()

    def build(_library: str, _name: str, *, train: bool = False, real: bool = False,
              shrink: int | None = None) -> Any:
        torch.manual_seed(0)
        if real:
            return _CachedCoords(), (torch.randn(2, 4),), {}
        with torch.device("meta"):
            return _CachedCoords(), (torch.randn(2, 4),), {}

    monkeypatch.setattr(atlas_trace, "build", build)
    ol = atlas_trace.trace_atlas("atlas:transformers/tiny", InputSpec())
    assert ol.recorder == "real-data"
    assert "aten::arange.start_step" in {u.op for u in ol.ops} or "aten::arange" in {
        u.op.split(".")[0] for u in ol.ops}  # the helper ran again on the real-data device


def test_only_the_models_own_caches_are_emptied() -> None:
    _coords.cache_clear()
    _coords(3, "cpu")
    other = functools.lru_cache(maxsize=2)(lambda n: n)
    other.__module__ = "somewhere.else"
    other(1)
    assert atlas_trace.forget_cached_values({__name__}) >= 1
    assert _coords.cache_info().currsize == 0
    assert other.cache_info().currsize == 1


def test_a_none_a_real_run_reads_too_is_same_on_real() -> None:
    assert runtime.same_on_real("TypeError: must be real number, not NoneType")


class _CountsLayers(torch.nn.Module):  # type: ignore[misc,name-defined]
    """Branches on a value; its projection fits its input only when built with every layer."""

    def __init__(self, fits: bool) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4 if fits else 3, 4)

    def forward(self, x: Any) -> Any:
        if x.sum() > -1e9:
            return self.proj(x)
        return x


def test_a_narrowed_build_failing_on_a_shape_is_retried_with_every_layer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    every = atlas_hf.EVERY_LAYER
    asked: list[Any] = []

    def build(_library: str, _name: str, *, train: bool = False, real: bool = False,
              shrink: int | None = None) -> Any:
        asked.append(shrink if real else "fake")
        if real:
            return _CountsLayers(shrink == every), (torch.randn(2, 4),), {}
        with torch.device("meta"):
            return _CountsLayers(True), (torch.randn(2, 4),), {}

    monkeypatch.setattr(atlas_trace, "build", build)
    ol = atlas_trace.trace_atlas("atlas:transformers/tiny", InputSpec())
    assert ol.recorder == "real-data"
    assert asked == ["fake", None, every]  # before the default widths (shrink=2)


def test_the_every_layer_level_keeps_the_layers_and_narrows_the_widths() -> None:
    default = atlas_hf.make_config("eomt", 0)
    every = atlas_hf.make_config("eomt", atlas_hf.EVERY_LAYER)
    narrowed = atlas_hf.make_config("eomt", 3)
    assert every.num_hidden_layers == default.num_hidden_layers > narrowed.num_hidden_layers
    assert every.hidden_size == narrowed.hidden_size < default.hidden_size
    # the count of last layers the model predicts masks in still fits its layers
    assert every.num_blocks <= every.num_hidden_layers


def test_a_gru_cell_traces_on_fake_tensors() -> None:
    # torch has no Meta kernel for the fused GRU cell: FakeTensor's fallback then ran it on
    # real zeros of the fake device and stopped at aten::zero_
    with torch.device("meta"):
        cell, x = torch.nn.GRUCell(4, 3), torch.randn(2, 4)
    ol = runtime.trace_module(cell, InputSpec(), example_args=(x,), label="gru")
    assert "aten::_thnn_fused_gru_cell" in {u.op for u in ol.ops}
    assert ol.recorder == "fake-tensors"


def test_caches_are_found_after_the_collector_froze_them() -> None:
    """The sandbox's template calls gc.freeze() before forking: frozen objects are not in
    gc.get_objects(), and a cached helper of the model must still be emptied."""
    import gc

    _coords.cache_clear()
    _coords(3, "cpu")
    gc.freeze()
    try:
        assert atlas_trace.forget_cached_values({__name__}) >= 1
        assert _coords.cache_info().currsize == 0
    finally:
        gc.unfreeze()


def _compile_safe_cache(fn: Any) -> Any:
    """A decorator as transformers' compile_compatible_method_lru_cache is: the cache in its
    wrapper's closure, not on the name the module or class binds."""
    cached = functools.lru_cache(maxsize=4)(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        return cached(*args)

    return wrapper


@_compile_safe_cache
def _wrapped_coords(n: int) -> Any:
    return torch.arange(n)


class _WrappedCache:
    @_compile_safe_cache
    def grid(self, n: int) -> Any:
        return torch.arange(n)


def test_a_cache_held_in_a_decorators_closure_is_emptied() -> None:
    holder = _WrappedCache()
    _wrapped_coords(3)
    holder.grid(2)
    inner = [c.cell_contents for f in (_wrapped_coords, _WrappedCache.grid)
             for c in f.__closure__ or () if isinstance(c.cell_contents, functools._lru_cache_wrapper)]
    assert len(inner) == 2 and all(c.cache_info().currsize == 1 for c in inner)
    assert atlas_trace.forget_cached_values({__name__}) >= 2
    assert all(c.cache_info().currsize == 0 for c in inner)


class _LongBranch(torch.nn.Module):  # type: ignore[misc,name-defined]
    """Branches on a value: the fake trace stops; its real build fails (in the test)."""

    def forward(self, x: Any) -> Any:
        if x.sum() > -1e9:
            return x * 2
        return x


def test_both_reasons_fit_the_row_when_the_real_data_run_fails_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opcheck.checker.zoo import ERROR_CHARS, _one_line

    def build(_library: str, _name: str, *, train: bool = False, real: bool = False,
              shrink: int | None = None) -> Any:
        if real:
            raise TraceError("its default config does not build: can't allocate memory "
                             + "x" * 600)
        with torch.device("meta"):
            return _LongBranch(), (torch.randn(2, 4),), {}

    monkeypatch.setattr(atlas_trace, "build", build)
    with pytest.raises(TraceError) as caught:
        atlas_trace.trace_atlas("atlas:transformers/tiny", InputSpec())
    said = str(caught.value)
    assert len(said) <= ERROR_CHARS and _one_line(said) == said  # the row keeps all of it
    assert said.startswith("data-dependent control flow at ")
    assert "the real-data recorder failed too: its default config does not build: can't " \
           "allocate memory" in said
