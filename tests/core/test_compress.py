from __future__ import annotations

import pytest
import safetensors.torch
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.core.train.compress import (
    UpdateFormatError,
    compress,
    compress_with_feedback,
    decode_update,
    decompress,
    decompress_sparse,
    encode_update,
    expected_header,
)

N = 10_000  # 3 chunks of 4096, the last one padded


def _x(seed: int = 0) -> torch.Tensor:
    return torch.randn(N, generator=torch.Generator().manual_seed(seed))  # (N,)


@pytest.mark.parametrize("bits", [2, 8])
def test_roundtrip_and_topk_selection(bits: int) -> None:
    x = _x()
    c = compress(x, 4096, 64, bits)
    blob = encode_update(c)
    back = decode_update(blob, expected_header(N, 4096, 64, bits))
    dense, mask = decompress_sparse(back)
    assert torch.equal(dense, decompress(c)) and dense.shape == (N,)
    assert int(mask.sum()) == 3 * 64
    # each full chunk keeps exactly its 64 largest magnitudes
    chunk0 = x[:4096].abs()
    assert set(torch.nonzero(mask[:4096]).flatten().tolist()) == set(
        torch.topk(chunk0, 64).indices.tolist())
    # values keep their sign, and the error is bounded by the quantization step
    kept = x[mask]
    assert torch.equal(torch.sign(dense[mask]), torch.sign(kept))
    step = x.abs().max() / (1.5 if bits == 2 else 127)
    assert float((dense[mask] - kept).abs().max()) <= float(step) + 1e-6
    assert len(blob) < (N * 4) / 20  # > 20x smaller than float32


def test_compression_is_deterministic() -> None:
    assert encode_update(compress(_x(), 4096, 64, 2)) == encode_update(compress(_x(), 4096, 64, 2))


def test_error_feedback_identity() -> None:
    ef, delta = _x(1) * 0.1, _x(2)
    c, residual = compress_with_feedback(delta, ef, 4096, 64, 2, 1.0)
    assert torch.allclose(decompress(c) + residual, ef + delta, atol=1e-6)
    # the residual carries what was not sent: next round's top-k can pick it up
    c2, _ = compress_with_feedback(torch.zeros(N), residual, 4096, 64, 2, 1.0)
    assert int(decompress_sparse(c2)[1].sum()) == 3 * 64


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 9000), st.sampled_from([2, 8]), st.integers(0, 2**31))
def test_any_vector_roundtrips(n: int, bits: int, seed: int) -> None:
    x = torch.randn(n, generator=torch.Generator().manual_seed(seed))
    c = compress(x, 4096, 64, bits)
    back = decode_update(encode_update(c), expected_header(n, 4096, 64, bits))
    assert torch.equal(decompress(back), decompress(c))


def _tensors(bits: int = 2) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    c = compress(_x(), 4096, 64, bits)
    return ({"idx": c.idx, "codes": c.codes, "scale": c.scale},
            {"veritrain": c.header.model_dump_json()})


def test_decoder_rejects_malformed_updates() -> None:
    want = expected_header(N, 4096, 64, 2)
    t, meta = _tensors()
    nan_scale = t["scale"].clone()
    nan_scale[1] = float("nan")
    inf_scale = t["scale"].clone()
    inf_scale[0] = float("inf")
    unsorted = t["idx"].clone()
    unsorted[0, :2] = unsorted[0, :2].flip(0)
    out_of_chunk = t["idx"].clone()
    out_of_chunk[0, -1] = 5000
    cases = [
        dict(t, scale=nan_scale), dict(t, scale=inf_scale), dict(t, scale=-t["scale"]),
        dict(t, idx=unsorted), dict(t, idx=out_of_chunk), dict(t, idx=t["idx"].int()),
        dict(t, codes=t["codes"][:, :8].contiguous()), dict(t, extra=torch.zeros(1)),
    ]
    for bad in cases:
        with pytest.raises(UpdateFormatError):
            decode_update(safetensors.torch.save(bad, meta), want)
    good = safetensors.torch.save(t, meta)
    with pytest.raises(UpdateFormatError):  # header does not match the run config
        decode_update(good, want.model_copy(update={"topk": 32}))
    with pytest.raises(UpdateFormatError):
        decode_update(safetensors.torch.save(t, {"veritrain": '{"format": "x"}'}), want)
    for junk in (b"", b"\x80\x04\x95pickle", good[:-1], good + b"\0" * (1 << 21)):
        with pytest.raises(UpdateFormatError):
            decode_update(junk, want)


def test_int8_rejects_minus_128() -> None:
    t, meta = _tensors(8)
    codes = t["codes"].clone()
    codes[0, 0] = -128
    with pytest.raises(UpdateFormatError):
        decode_update(safetensors.torch.save(dict(t, codes=codes), meta),
                      expected_header(N, 4096, 64, 8))


def test_the_kept_values_are_those_of_the_padded_chunks_sign_of_zero_included() -> None:
    """`compress` takes the values from x itself, not from a signed padded copy: the same bits."""
    from protocol.core.train.compress import _chunks, _take_padded

    g = torch.Generator().manual_seed(0)
    for n in (4096 * 3, 4096 * 3 + 17, 100):
        x = torch.randn(n, generator=g)
        x[::7], x[::11] = -0.0, 0.0
        rows = _chunks(x, 4096)
        _, idx = torch.topk(rows.abs(), 192, dim=1, sorted=False)
        idx, _ = torch.sort(idx, dim=1)
        want, got = torch.gather(rows, 1, idx), _take_padded(x, idx, 4096)
        assert torch.equal(got, want) and torch.equal(torch.signbit(got), torch.signbit(want))
        assert torch.equal(compress(x, 4096, 192, 2).idx.to(torch.int64), idx)


def test_a_consumed_delta_gives_the_same_update_and_residual() -> None:
    g = torch.Generator().manual_seed(1)
    delta, ef = torch.randn(10_000, generator=g), torch.randn(10_000, generator=g)
    c1, r1 = compress_with_feedback(delta, ef, 4096, 64, 2, 0.9)
    c2, r2 = compress_with_feedback(delta.clone(), ef, 4096, 64, 2, 0.9, consume=True)
    assert torch.equal(r1, r2) and torch.equal(c1.idx, c2.idx) and torch.equal(c1.codes, c2.codes)
