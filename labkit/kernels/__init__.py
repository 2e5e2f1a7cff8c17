"""The kernels of the drafter's sampling path, each with a pure-torch reference of the same semantics."""

from labkit.kernels.dflash_prep import prepare_dflash_sample_mapping, prepare_dflash_sample_mapping_torch
from labkit.kernels.gumbel import WriteTrace, gumbel_sample, gumbel_sample_torch
from labkit.kernels.rejection import rejection_sample, rejection_sample_torch
from labkit.kernels.sampling_state import SamplingState

__all__ = [
    "SamplingState",
    "WriteTrace",
    "gumbel_sample",
    "gumbel_sample_torch",
    "prepare_dflash_sample_mapping",
    "prepare_dflash_sample_mapping_torch",
    "rejection_sample",
    "rejection_sample_torch",
]
