"""Where a kernel's arrays live in shared memory, and the trace each worker leaves."""

from numavia import trace
from numavia.gateware.coherence import LINE_BYTES

DOUBLE_BYTES = 8
LINE_WORDS = LINE_BYTES // 4


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


class SharedArrays:
    """Row-distributed arrays of doubles: each row lives in the shared slice of the worker that
    owns it (the owner initialises and writes it), so a worker's own rows are local memory and
    everyone else's are remote. Arrays are packed one after another in every slice."""

    def __init__(self, address_map, workers):
        self.amap = address_map
        self.workers = workers
        self.used = [0] * workers      # bytes allocated in each worker's slice
        self.arrays = {}

    def allocate(self, name, rows, cols):
        row_bytes = cols * DOUBLE_BYTES
        if row_bytes % LINE_BYTES:
            raise ValueError(f"{name}: a row of {cols} doubles is not a whole number of {LINE_BYTES}-byte lines")
        parts = block_rows(rows, self.workers)
        owner, where = {}, {}
        for p, part in enumerate(parts):
            base = self.used[p]
            self.used[p] += len(part) * row_bytes
            if self.used[p] > self.amap.slice_bytes:
                raise ValueError(f"{name} does not fit in worker {p}'s {self.amap.slice_bytes}-byte slice")
            for i, r in enumerate(part):
                owner[r] = p
                where[r] = p * self.amap.slice_bytes + base + i * row_bytes
        self.arrays[name] = (parts, owner, where, row_bytes)
        return name

    def rows(self, name, worker):
        return self.arrays[name][0][worker]

    def row_address(self, name, row):
        return self.arrays[name][2][row]

    def row_bytes(self, name):
        return self.arrays[name][3]


class TraceBuilder:
    """Per-node trace records. ``nodes`` is the ring (every node takes part in every barrier);
    the workers are nodes ``0 .. workers - 1``. Compute accumulates into the next access's gap."""

    def __init__(self, arrays, nodes):
        if arrays.workers > nodes:
            raise ValueError(f"{arrays.workers} workers on a {nodes}-node ring")
        self.arrays = arrays
        self.nodes = nodes
        self.records = {n: [] for n in range(nodes)}
        self.pending = [0] * nodes
        self.barriers = 0

    def compute(self, node, cycles):
        self.pending[node] += int(cycles)

    def _gap(self, node):
        gap, self.pending[node] = self.pending[node], 0
        return gap

    def read_row(self, node, array, row):
        base = self.arrays.row_address(array, row)
        for offset in range(0, self.arrays.row_bytes(array), LINE_BYTES):
            self.records[node].append(trace.read_access(base + offset, words=LINE_WORDS, gap=self._gap(node)))

    def write_row(self, node, array, row, tag):
        base = self.arrays.row_address(array, row)
        for offset in range(0, self.arrays.row_bytes(array), LINE_BYTES):
            self.records[node].append(trace.write_access(base + offset, tag, words=LINE_WORDS, gap=self._gap(node)))

    def barrier(self):
        self.barriers += 1
        for node in range(self.nodes):
            self.records[node].append(trace.barrier(self.barriers, gap=self._gap(node)))

    def write(self, folder):
        """node<i>.trace for every node of the ring; returns the access count per node."""
        counts = {}
        for node, recs in self.records.items():
            trace.write_trace(folder / f"node{node}.trace", node, recs)
            counts[node] = sum(r.kind != trace.Kind.BARRIER for r in recs)
        return counts
