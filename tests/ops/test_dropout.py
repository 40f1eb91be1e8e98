"""dropout's reference Philox (ops/specs/dropout.py) on the CPU, with NumPy int64 arrays (no torch).

The reference runs the same integer operators on torch tensors on the GPU; here they are held to the
Random123 known-answer vectors of Philox4x32-10, so a wrong constant, round or word order fails. The
kernel's mask is compared with this reference by the interpreter (eval/interp/corpus.py, dropout
problems: exact agreement) for the cuTile Python kernel and for its port.
"""

from __future__ import annotations

import numpy as np
import pytest

from tileport.ops.specs import dropout

# (counter words, key words, Philox4x32-10 output words): Random123's kat_vectors
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,want", KAT)
def test_reference_philox_matches_known_answers(counter, key, want):
    words = dropout.philox4x32(*(np.array([c], dtype=np.int64) for c in counter), *key)
    assert tuple(int(w[0]) for w in words) == want


def test_reference_philox_with_fewer_rounds_differs():
    counter, key, want = KAT[2]
    words = dropout.philox4x32(*(np.array([c], dtype=np.int64) for c in counter), *key, rounds=7)
    assert tuple(int(w[0]) for w in words) != want


def test_keep_mask_follows_p_and_depends_on_seed_and_offset():
    index = np.arange(1 << 16, dtype=np.int64)
    thr = dropout.threshold_of(0.3)
    keep = dropout.keep_mask(index, dropout.SEED, dropout.OFFSET, thr)
    assert abs(keep.mean() - 0.7) < 0.01
    assert (keep != dropout.keep_mask(index, dropout.SEED + 1, dropout.OFFSET, thr)).mean() > 0.3
    # offset shifts the stream: element i at offset o + 1 is element i + 1 at offset o
    shifted = dropout.keep_mask(index[:-1], dropout.SEED, dropout.OFFSET + 1, thr)
    assert (shifted == keep[1:]).all()
    assert dropout.keep_mask(index, -5, 0, 0).all() and not dropout.keep_mask(index, 7, 0, 1 << 24).any()


def test_scale_is_the_f32_reciprocal_of_the_keep_probability():
    assert dropout.scale_of(0.3) == float(np.float32(1 / 0.7))
    assert dropout.threshold_of(0.3) == round(0.3 * 2 ** 24)
