"""An Amaranth component's converted Verilog as a Migen ``Instance``, ports derived from its
signature (named as ``amaranth.back.verilog`` names them: the member path joined by ``__``)."""

from amaranth.hdl import Shape
from amaranth.lib import wiring
from migen import ClockSignal, Instance, ResetSignal, Signal


def port_list(signature):
    """``[(name, direction, width)]`` of a component signature's ports; direction is "i" or "o"."""
    ports = []
    for path, member in signature.members.flatten():
        if not member.is_port:
            continue
        name = "__".join(str(p) for p in path)
        direction = "i" if member.flow == wiring.In else "o"
        ports.append((name, direction, Shape.cast(member.shape).width))
    return ports


class AmaranthInstance:
    """Migen signals for every port of a component (given its signature) and the Instance of its
    Verilog module."""

    def __init__(self, signature, module_name, clock_domain="sys"):
        self.ports = {}
        self._outputs = set()
        connections = {"i_clk": ClockSignal(clock_domain), "i_rst": ResetSignal(clock_domain)}
        for name, direction, width in port_list(signature):
            signal = Signal(width, name=name)
            self.ports[name] = signal
            if direction == "o":
                self._outputs.add(name)
            connections[f"{direction}_{name}"] = signal
        self.instance = Instance(module_name, **connections)

    def __getitem__(self, name):
        return self.ports[name]

    def group(self, prefix):
        """``{suffix: signal}`` of the ports whose name starts with ``prefix + "__"``."""
        start = prefix + "__"
        return {name[len(start) :]: sig for name, sig in self.ports.items() if name.startswith(start)}

    def connect_wishbone(self, prefix, bus, addr_width):
        """Statements joining a LiteX wishbone.Interface (a master) to the target port ``prefix``."""
        p = self.group(prefix)
        return [
            p["cyc"].eq(bus.cyc),
            p["stb"].eq(bus.stb),
            p["we"].eq(bus.we),
            p["adr"].eq(bus.adr[:addr_width]),
            p["dat_w"].eq(bus.dat_w),
            p["sel"].eq(bus.sel),
            bus.dat_r.eq(p["dat_r"]),
            bus.ack.eq(p["ack"]),
            bus.err.eq(p["err"]),
        ]

    def connect_wishbone_initiator(self, prefix, bus, addr_width):
        """Statements joining the initiator port ``prefix`` (with ``cti``/``bte`` when it bursts) to
        a LiteX wishbone.Interface (a slave)."""
        p = self.group(prefix)
        statements = [
            bus.cyc.eq(p["cyc"]),
            bus.stb.eq(p["stb"]),
            bus.we.eq(p["we"]),
            bus.adr.eq(p["adr"]),
            bus.dat_w.eq(p["dat_w"]),
            bus.sel.eq(p["sel"]),
            p["dat_r"].eq(bus.dat_r),
            p["ack"].eq(bus.ack),
            p["err"].eq(bus.err),
        ]
        statements += [getattr(bus, name).eq(p[name]) for name in ("cti", "bte") if name in p]
        return statements

    def connect_stream(self, prefix, endpoint, payload):
        """Statements joining the stream port ``prefix`` to a LiteX ``stream.Endpoint``; ``payload``
        is the endpoint's fields concatenated in the order of the port's payload layout. The
        direction follows the port's ``valid``."""
        p = self.group(prefix)
        if f"{prefix}__valid" in self._outputs:
            return [endpoint.valid.eq(p["valid"]), p["ready"].eq(endpoint.ready), payload.eq(p["payload"])]
        return [p["valid"].eq(endpoint.valid), endpoint.ready.eq(p["ready"]), p["payload"].eq(payload)]
