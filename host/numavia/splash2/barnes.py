"""SPLASH-2 Barnes: Barnes-Hut gravitational N-body simulation in 3-D with P processes.

Each time step, as in SPLASH-2's ``stepsystem``:

1. Bounding box: each process reduces its bodies' positions into a shared slot; all read all
   slots; process 0 sets up the root cell.
2. Tree build: every process inserts its bodies into the one shared octree (leaves hold up to
   ``leaf_bodies`` bodies; a full leaf becomes a cell), taking the lock of the cell or leaf it
   changes. Cells and leaves come from the inserting process's own pool, in its node's slice.
   The processes insert concurrently; here their insertions are interleaved one body at a time.
3. Centres of mass, bottom-up: the creator of each cell or leaf computes its mass, centre of mass
   and cost from its children, one tree level at a time (a barrier between levels, where
   SPLASH-2 spins on per-cell flags).
4. Cost zones: the bodies, in tree order, are split into P zones of equal cost (a body's cost is
   its interaction count of the previous step; 1 in the first step, where SPLASH-2 splits by
   index as well); each process finds its zone by descending the tree.
5. Forces: each process walks the tree for each of its bodies (a cell is opened when the body is
   closer to its centre of mass than ``size / theta``; monopoles only, where SPLASH-2 also has
   quadrupole moments), and writes the body's acceleration, potential and cost.
6. Update: symplectic Euler (velocity, then position).

Placement as in the paper: everything is shared. Bodies are partitioned equally by index over the
nodes' slices (their owner for computation changes with the cost zones; their home does not);
cells and leaves live in their creator's slice.

Records are two 64-byte lines. Body: line 0 mass, position (what other processes read); line 1
velocity, acceleration, potential, cost. Cell: line 0 mass, centre of mass, 8 child pointers;
line 1 cost and lock. Leaf: line 0 mass, centre of mass, 8 body pointers; line 1 cost and lock.
A lock is taken by reading and writing its word (the trace format has no atomic operation) and
released by a write.
"""

from dataclasses import dataclass

import numpy as np

from numavia.instrument import KernelRun

RECORD_BYTES = 128
HEADER = (0, 32)  # mass + position / centre of mass
POINTERS = (32, 32)  # child or body pointers (line 0)
BODY_MOTION = (64, 48)  # velocity, acceleration
BODY_RESULT = (88, 40)  # acceleration, potential, cost (written by the force walk)
COST = (64, 8)  # of a cell or leaf
BODY_COST = (120, 8)
LOCK = (72, 4)
BOX_SLOT = 48  # a process's bounding box: min and max corner

INTERACTION_OPS = 30  # distance (8), inverse square root (12, x87 fsqrt + fdiv), update (10)
OPENING_OPS = 10  # distance to the centre of mass against the cell size
COM_OPS_PER_CHILD = 8
INSERT_OPS_PER_LEVEL = 6
UPDATE_OPS = 12


@dataclass(frozen=True)
class Params:
    bodies: int = 4096
    steps: int = 2
    theta: float = 1.0
    eps: float = 0.05
    dt: float = 0.025
    leaf_bodies: int = 8
    seed: int = 123

    def describe(self):
        return f"{self.bodies} bodies, {self.steps} time steps, theta {self.theta}"


SIZES = {"small": Params(bodies=256, steps=2), "paper": Params(bodies=4096, steps=2)}


def plummer(params):
    """Positions, velocities and masses of a Plummer sphere (total mass 1, G = 1), in random
    order, centred."""
    rng = np.random.default_rng(params.seed)
    n = params.bodies
    scale = 3 * np.pi / 16
    radius = np.empty(n)
    for i in range(n):
        while True:
            r = 1.0 / np.sqrt(rng.random() ** (-2.0 / 3.0) - 1.0)
            if r < 9.0:
                radius[i] = r
                break
    pos = _isotropic(rng, radius) * scale
    speed = np.empty(n)
    for i in range(n):
        while True:
            x, y = rng.random(), 0.1 * rng.random()
            if y <= x * x * (1 - x * x) ** 3.5:
                break
        speed[i] = x * np.sqrt(2.0) * (1 + radius[i] ** 2) ** -0.25
    vel = _isotropic(rng, speed) / np.sqrt(scale)
    pos -= pos.mean(axis=0)
    vel -= vel.mean(axis=0)
    return pos, vel, np.full(n, 1.0 / n)


def _isotropic(rng, length):
    z = rng.uniform(-1, 1, len(length))
    phi = rng.uniform(0, 2 * np.pi, len(length))
    s = np.sqrt(1 - z * z)
    return length[:, None] * np.stack([s * np.cos(phi), s * np.sin(phi), z], axis=1)


def direct_accelerations(pos, mass, eps, chunk=256):
    """O(n^2) softened gravity: the reference the tree is checked against."""
    acc = np.zeros_like(pos)
    for start in range(0, len(pos), chunk):
        rows = slice(start, start + chunk)
        d = pos[None, :, :] - pos[rows, None, :]
        r2 = np.sum(d * d, axis=2) + eps * eps
        inv = r2**-1.5
        inv[np.arange(len(inv)), np.arange(start, start + len(inv))] = 0.0
        acc[rows] = np.einsum("ij,ijk->ik", inv * mass[None, :], d)
    return acc


class _Pools:
    """Each process's cell/leaf records in its node's slice, reused every step."""

    def __init__(self, machine):
        self.machine = machine
        self.addr = [[] for _ in range(machine.processes)]
        self.used = [0] * machine.processes

    def reset(self):
        self.used = [0] * self.machine.processes

    def take(self, p):
        if self.used[p] == len(self.addr[p]):
            self.addr[p].append(self.machine.alloc(f"tree record {self.used[p]} of {p}", p, RECORD_BYTES))
        self.used[p] += 1
        return self.addr[p][self.used[p] - 1]


class _Tree:
    """The octree of one step: arrays indexed by node number."""

    def __init__(self, centre, half):
        self.leaf, self.depth, self.creator, self.addr = [], [], [], []
        self.children = []  # cell: 8 node numbers (-1: empty); leaf: list of bodies
        self.centre, self.half = [], []
        self.mass, self.com, self.cost = [], [], []
        self.dead = set()  # leaves that became cells while the tree was built
        self.root = self.new(False, 0, centre, half, 0, None)

    def new(self, leaf, depth, centre, half, creator, addr):
        self.leaf.append(leaf)
        self.depth.append(depth)
        self.creator.append(creator)
        self.addr.append(addr)
        self.children.append([] if leaf else [-1] * 8)
        self.centre.append(np.asarray(centre, dtype=float))
        self.half.append(half)
        self.mass.append(0.0)
        self.com.append(np.zeros(3))
        self.cost.append(0.0)
        return len(self.leaf) - 1


def _octant(p, centre):
    return int(p[0] > centre[0]) | int(p[1] > centre[1]) << 1 | int(p[2] > centre[2]) << 2


def _child_centre(centre, half, octant):
    offset = np.array([1 if octant >> k & 1 else -1 for k in range(3)]) * half / 2
    return centre + offset


class _Barnes:
    def __init__(self, params, machine):
        self.params, self.machine = params, machine
        self.rec = machine.recorders
        P, n = machine.processes, params.bodies
        self.pos, self.vel, self.mass = plummer(params)
        self.acc = np.zeros((n, 3))
        self.phi = np.zeros(n)
        self.cost = np.ones(n)
        self.home = np.arange(n) * P // n
        self.body_addr = np.zeros(n, dtype=np.int64)
        for p in range(P):
            mine = np.flatnonzero(self.home == p)
            base = machine.alloc(f"bodies of {p}", p, len(mine) * RECORD_BYTES)
            self.body_addr[mine] = base + np.arange(len(mine)) * RECORD_BYTES
        self.box_slots = [machine.alloc(f"bounding box of {p}", p, BOX_SLOT) for p in range(P)]
        self.pools = _Pools(machine)
        self.zones = [list(np.flatnonzero(self.home == p)) for p in range(P)]
        self.interactions = 0

    # -- memory helpers -------------------------------------------------------------------------
    def body(self, p, b, field, write=False):
        offset, nbytes = field
        (self.rec[p].write if write else self.rec[p].read)(int(self.body_addr[b]) + offset, nbytes)

    def node(self, p, t, k, field, write=False):
        offset, nbytes = field
        (self.rec[p].write if write else self.rec[p].read)(int(t.addr[k]) + offset, nbytes)

    # -- 1. bounding box --------------------------------------------------------------------------
    def bounding_box(self):
        P = self.machine.processes
        for p in range(P):
            for b in self.zones[p]:
                self.body(p, b, HEADER)
            self.rec[p].compute(6 * len(self.zones[p]))
            self.rec[p].write(self.box_slots[p], BOX_SLOT)
        self.machine.barrier()
        for p in range(P):
            for q in range(P):
                self.rec[p].read(self.box_slots[q], BOX_SLOT)
            self.rec[p].compute(6 * P)
        low, high = self.pos.min(axis=0), self.pos.max(axis=0)
        centre = (low + high) / 2
        half = float(np.max(high - low)) / 2 * 1.00001 + 1e-12
        self.pools.reset()
        t = _Tree(centre, half)
        t.addr[t.root] = self.pools.take(0)
        self.node(0, t, t.root, POINTERS, write=True)
        self.node(0, t, t.root, COST, write=True)
        self.machine.barrier()
        return t

    # -- 2. tree build ----------------------------------------------------------------------------
    def new_node(self, t, p, leaf, parent, octant):
        k = t.new(
            leaf,
            t.depth[parent] + 1,
            _child_centre(t.centre[parent], t.half[parent], octant),
            t.half[parent] / 2,
            p,
            self.pools.take(p),
        )
        self.node(p, t, k, POINTERS, write=True)
        self.node(p, t, k, COST, write=True)
        return k

    def lock(self, p, t, k):
        self.node(p, t, k, LOCK)
        self.node(p, t, k, LOCK, write=True)

    def unlock(self, p, t, k):
        self.node(p, t, k, LOCK, write=True)

    def insert(self, t, p, b):
        rec = self.rec[p]
        self.body(p, b, HEADER)
        k = t.root
        while True:
            self.node(p, t, k, POINTERS)
            rec.compute(INSERT_OPS_PER_LEVEL)
            o = _octant(self.pos[b], t.centre[k])
            child = t.children[k][o]
            if child == -1:  # empty octant: a new leaf
                self.lock(p, t, k)
                leaf = self.new_node(t, p, True, k, o)
                t.children[leaf].append(b)
                t.children[k][o] = leaf
                self.node(p, t, k, POINTERS, write=True)
                self.unlock(p, t, k)
                return
            if not t.leaf[child]:
                k = child
                continue
            self.lock(p, t, child)
            self.node(p, t, child, POINTERS)
            if len(t.children[child]) < self.params.leaf_bodies:
                t.children[child].append(b)
                self.node(p, t, child, POINTERS, write=True)
                self.unlock(p, t, child)
                return
            # A full leaf: a new cell takes its place, its bodies and b go into new leaves.
            self.lock(p, t, k)
            bodies = t.children[child] + [b]
            cell = self.new_node(t, p, False, k, o)
            t.dead.add(child)
            for q in bodies[:-1]:
                self.body(p, q, HEADER)
            self.distribute(t, p, cell, bodies)
            t.children[k][o] = cell
            self.node(p, t, k, POINTERS, write=True)
            self.unlock(p, t, k)
            self.unlock(p, t, child)
            return

    def distribute(self, t, p, cell, bodies):
        groups = {}
        for q in bodies:
            groups.setdefault(_octant(self.pos[q], t.centre[cell]), []).append(q)
        self.rec[p].compute(INSERT_OPS_PER_LEVEL * len(bodies))
        for o, members in sorted(groups.items()):
            if len(members) <= self.params.leaf_bodies:
                k = self.new_node(t, p, True, cell, o)
                t.children[k] = members
            else:
                k = self.new_node(t, p, False, cell, o)
                self.distribute(t, p, k, members)
            t.children[cell][o] = k
        self.node(p, t, cell, POINTERS, write=True)

    def build(self, t):
        P = self.machine.processes
        order = [
            (p, b) for i in range(max(len(z) for z in self.zones)) for p in range(P) for b in self.zones[p][i : i + 1]
        ]
        for p, b in order:
            self.insert(t, p, b)
        self.machine.barrier()

    @staticmethod
    def live(t):
        return [k for k in range(len(t.leaf)) if k not in t.dead]

    # -- 3. centres of mass -----------------------------------------------------------------------
    def centres_of_mass(self, t):
        by_depth = {}
        for k in self.live(t):
            by_depth.setdefault(t.depth[k], []).append(k)
        for depth in sorted(by_depth, reverse=True):
            for k in by_depth[depth]:
                p = t.creator[k]
                self.node(p, t, k, POINTERS)
                if t.leaf[k]:
                    members = t.children[k]
                    for q in members:
                        self.body(p, q, HEADER)
                        self.body(p, q, BODY_COST)
                    m = self.mass[members]
                    t.mass[k] = float(m.sum())
                    t.com[k] = (m[:, None] * self.pos[members]).sum(axis=0) / t.mass[k]
                    t.cost[k] = float(self.cost[members].sum())
                else:
                    members = [c for c in t.children[k] if c != -1]
                    for c in members:
                        self.node(p, t, c, HEADER)
                        self.node(p, t, c, COST)
                    m = np.array([t.mass[c] for c in members])
                    t.mass[k] = float(m.sum())
                    t.com[k] = (m[:, None] * np.array([t.com[c] for c in members])).sum(axis=0) / t.mass[k]
                    t.cost[k] = float(sum(t.cost[c] for c in members))
                self.rec[p].compute(COM_OPS_PER_CHILD * len(members))
                self.node(p, t, k, HEADER, write=True)
                self.node(p, t, k, COST, write=True)
            self.machine.barrier()

    # -- 4. cost zones ----------------------------------------------------------------------------
    def partition(self, t):
        P = self.machine.processes
        total = t.cost[t.root]
        zones = []
        for p in range(P):
            low, high = p * total / P, (p + 1) * total / P
            mine = []
            self.node(p, t, t.root, COST)
            self.find_zone(t, p, t.root, 0.0, low, high, mine)
            zones.append(mine)
        self.zones = zones

    def find_zone(self, t, p, k, start, low, high, mine):
        """Bodies of subtree ``k`` (whose cumulative cost starts at ``start``) that fall in
        ``[low, high)``, by the cost of their first half."""
        self.node(p, t, k, POINTERS)
        if t.leaf[k]:
            for q in t.children[k]:
                self.body(p, q, BODY_COST)
                middle = start + self.cost[q] / 2
                if low <= middle < high:
                    mine.append(q)
                start += self.cost[q]
            self.rec[p].compute(4 * len(t.children[k]))
            return
        for c in t.children[k]:
            if c == -1:
                continue
            self.node(p, t, c, COST)
            self.rec[p].compute(4)
            if start < high and start + t.cost[c] > low:
                self.find_zone(t, p, c, start, low, high, mine)
            start += t.cost[c]

    # -- 5. forces --------------------------------------------------------------------------------
    def forces(self, t):
        theta2 = self.params.theta**2
        eps2 = self.params.eps**2
        for p, zone in enumerate(self.zones):
            rec = self.rec[p]
            for b in zone:
                self.body(p, b, HEADER)
                x = self.pos[b]
                partners_m, partners_x = [], []
                stack = [t.root]
                while stack:
                    k = stack.pop()
                    self.node(p, t, k, HEADER)
                    d = t.com[k] - x
                    size = 2 * t.half[k]
                    rec.compute(OPENING_OPS)
                    if theta2 * float(d @ d) >= size * size:  # far enough: one interaction
                        partners_m.append(t.mass[k])
                        partners_x.append(t.com[k])
                        continue
                    self.node(p, t, k, POINTERS)
                    if t.leaf[k]:
                        for q in t.children[k]:
                            if q == b:
                                continue
                            self.body(p, q, HEADER)
                            partners_m.append(self.mass[q])
                            partners_x.append(self.pos[q])
                    else:
                        stack.extend(c for c in reversed(t.children[k]) if c != -1)
                m = np.array(partners_m)
                d = np.array(partners_x) - x
                r2 = np.sum(d * d, axis=1) + eps2
                inv = r2**-0.5
                self.acc[b] = ((m * inv**3)[:, None] * d).sum(axis=0)
                self.phi[b] = -float((m * inv).sum())
                self.cost[b] = len(m)
                self.interactions += len(m)
                rec.compute(INTERACTION_OPS * len(m))
                self.body(p, b, BODY_RESULT, write=True)
        self.machine.barrier()

    # -- 6. update --------------------------------------------------------------------------------
    def update(self):
        dt = self.params.dt
        for p, zone in enumerate(self.zones):
            zone = np.array(zone, dtype=int)
            for b in zone:
                self.body(p, b, BODY_MOTION)
                self.body(p, b, HEADER)
                self.rec[p].compute(UPDATE_OPS)
                self.body(p, b, HEADER, write=True)
                self.body(p, b, (BODY_MOTION[0], 24), write=True)
            self.vel[zone] += self.acc[zone] * dt
            self.pos[zone] += self.vel[zone] * dt
        self.machine.barrier()

    def step(self):
        t = self.bounding_box()
        self.build(t)
        self.centres_of_mass(t)
        self.partition(t)
        self.forces(t)
        self.update()
        return t


def run(params, machine):
    """Simulate ``params.steps`` steps. Result: ``(positions, accelerations of the last step and
    the positions they were computed at, masses)``."""
    sim = _Barnes(params, machine)
    info = {"tree_nodes": [], "tree_depth": [], "zone_sizes": []}
    for _ in range(params.steps):
        before = sim.pos.copy()
        t = sim.step()
        info["tree_nodes"].append(len(sim.live(t)))
        info["tree_depth"].append(max(t.depth))
        info["zone_sizes"].append([len(z) for z in sim.zones])
    machine.finish()
    info["interactions"] = sim.interactions
    return KernelRun(
        machine, {"pos": sim.pos.copy(), "acc": sim.acc.copy(), "acc_at": before, "mass": sim.mass.copy()}, info
    )


def reference(params):
    return params


def check(result, params, rtol=None):
    """Tree accelerations of the last step against the direct sum at the same positions:
    relative RMS error (over bodies) below ``rtol`` (default: 1e-10 when theta is 0, where the
    tree degenerates to the direct sum, else 0.1 * theta)."""
    rtol = rtol if rtol is not None else (1e-10 if params.theta == 0 else 0.1 * params.theta)
    exact = direct_accelerations(result["acc_at"], result["mass"], params.eps)
    err = np.sqrt(np.mean(np.sum((result["acc"] - exact) ** 2, axis=1)) / np.mean(np.sum(exact**2, axis=1)))
    if err > rtol:
        raise AssertionError(f"Barnes: RMS force error {err:.3g} against the direct sum")
    return err
