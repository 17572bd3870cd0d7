"""SPLASH-2 kernels as trace generators for the card ring: LU, FFT, Ocean and Barnes really
compute, with P processes, and record every access to shared data (see ``instrument``).

Each kernel module has ``Params``, ``SIZES`` (``small`` for tests, ``paper`` for the paper's
problem sizes), ``run(params, machine, ...)``, ``reference(params)`` and ``check(result, ref)``.
"""

from dataclasses import dataclass

from numavia.instrument import CostModel, Machine

from . import barnes, fft, lu, ocean

KERNELS = {"lu": lu, "fft": fft, "ocean": ocean, "barnes": barnes}
NAMES = {"lu": "LU", "fft": "FFT", "ocean": "Ocean", "barnes": "Barnes"}

#: Placements: "paper" puts the data only its own process touches in local memory where the
#: paper did (Ocean, FFT; LU and Barnes keep everything shared); "shared" keeps everything shared.
PLACEMENTS = ("paper", "shared")
HAS_LOCAL_DATA = {"fft", "ocean"}


@dataclass(frozen=True)
class Generated:
    kernel: str
    params: object
    machine: Machine
    result: object
    info: dict
    error: float  # of the result against the kernel's reference


def params_for(kernel, size):
    try:
        return KERNELS[kernel].SIZES[size]
    except KeyError:
        raise ValueError(f"unknown kernel {kernel!r} or size {size!r}") from None


def generate(kernel, params, processes, *, placement="paper", slice_bytes, cost=None, access="line"):
    """Run ``kernel`` with ``processes`` processes, check it against its reference, and return
    the recorded machine (traces) with the result."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}")
    module = KERNELS[kernel]
    machine = Machine(processes, slice_bytes, cost or CostModel(), access)
    if kernel in HAS_LOCAL_DATA:
        run = module.run(params, machine, placement)
    else:
        run = module.run(params, machine)
    error = module.check(run.result, module.reference(params))
    return Generated(kernel, params, machine, run.result, run.info, float(error))
