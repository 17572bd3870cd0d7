"""Row-distributed arrays of doubles in the ring's shared slices (on :class:`numavia.instrument.Machine`)."""

from numavia.base.coherence import LINE_BYTES
from numavia.instrument import PlacementError

DOUBLE_BYTES = 8


def block_rows(rows, workers):
    """Worker ``p``'s rows: contiguous blocks, the first ones one row larger if uneven."""
    base, extra = divmod(rows, workers)
    start = 0
    out = []
    for p in range(workers):
        count = base + (p < extra)
        out.append(range(start, start + count))
        start += count
    return out


class RowArrays:
    """Each row lives in the shared slice of the worker that owns it (the owner initialises and
    writes it), so a worker's own rows are home memory and everyone else's are remote. Workers
    are the machine's processes ``0 .. workers - 1``; the others only meet the barriers."""

    def __init__(self, machine, workers):
        if not 1 <= workers <= machine.processes:
            raise PlacementError(f"{workers} workers on a {machine.processes}-node ring")
        self.machine = machine
        self.workers = workers
        self._arrays = {}

    def allocate(self, name, rows, cols):
        row_bytes = cols * DOUBLE_BYTES
        if row_bytes % LINE_BYTES:
            raise PlacementError(f"{name}: a row of {cols} doubles is not a whole number of {LINE_BYTES}-byte lines")
        parts = block_rows(rows, self.workers)
        where = {}
        for p, part in enumerate(parts):
            base = self.machine.alloc(f"{name} rows {part.start}..{part.stop - 1}", p, len(part) * row_bytes)
            where.update({r: base + i * row_bytes for i, r in enumerate(part)})
        self._arrays[name] = (parts, where, row_bytes)
        return name

    def rows(self, name, worker):
        return self._arrays[name][0][worker]

    def row_address(self, name, row):
        return self._arrays[name][1][row]

    def read_row(self, worker, name, row):
        self.machine.recorders[worker].read(self.row_address(name, row), self._arrays[name][2])

    def write_row(self, worker, name, row):
        self.machine.recorders[worker].write(self.row_address(name, row), self._arrays[name][2])

    def compute(self, worker, cycles):
        self.machine.recorders[worker].compute(cycles)

    def barrier(self):
        self.machine.barrier()
