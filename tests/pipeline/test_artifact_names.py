"""Artifact file names made from capture labels stay distinct when a label is longer than the cut."""

from tileport.pipeline.artifacts import SLUG_MAX, slug

LABEL = ("flash_decode_partial_kernel[float16/float32/int32](BLOCK_N=128,FINAL=False,GROUP_TILE=16,HAS_SINKS=False,"
         "HEAD_DIM=128,PAGED=False,SLIDING=False,SOFTCAP={})")


def test_labels_that_differ_past_the_cut_get_distinct_names():
    """Regression: both softcap variants of flash_decode's partial kernel were cut to `..._SOFTCA` and shared one
    reference file, which stage A's validator then found holding the other's bytecode."""
    off, on = slug(LABEL.format(False)), slug(LABEL.format(True))
    assert off != on and len(off) <= SLUG_MAX and len(on) <= SLUG_MAX
    assert slug(LABEL.format(False)) == off  # deterministic


def test_a_short_label_is_only_made_file_safe():
    assert slug("relu_kernel[float32](TILE=1024)") == "relu_kernel_float32_TILE=1024"
