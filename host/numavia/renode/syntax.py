"""Readers for the Renode constructs the generators emit, strict enough to catch a broken file.

Not a full Renode parser: it accepts the subset of ``.repl`` and ``.resc`` syntax that
:mod:`numavia.renode` writes and rejects anything else with the line number, so the tests can
check generated files for structure (indentation blocks, registrations, properties, interrupt
connections, commands) and content (addresses, interrupt lines) without Renode.
"""

import re
from dataclasses import dataclass, field

from .soc import RenodeError


class SyntaxProblem(RenodeError):
    def __init__(self, kind, lineno, message):
        super().__init__(f"{kind} line {lineno}: {message}")
        self.lineno = lineno


INDENT = "    "
_NUMBER = r"(?:0x[0-9a-fA-F]+|\d+)"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ENTRY = re.compile(rf"^(?P<name>{_NAME}):(?: (?P<type>{_NAME}(?:\.{_NAME})+))?(?: @ (?P<where>.+))?$")
# `sysbus` alone registers a CPU; `sysbus 0x..` a peripheral; `sysbus <base, +size>` a sized range.
_SIMPLE_REG = re.compile(
    rf"^(?P<parent>{_NAME})(?: <(?P<base>{_NUMBER}), \+(?P<size>{_NUMBER})>| (?P<addr>{_NUMBER}))?$"
)
_MULTI_REG = re.compile(
    rf"^(?P<parent>{_NAME}) new Bus\.BusMultiRegistration \{{ address: (?P<base>{_NUMBER}); "
    rf'size: (?P<size>{_NUMBER}); region: "(?P<region>{_NAME})" \}}$'
)
_PROPERTY = re.compile(rf'^(?P<key>{_NAME}): (?P<value>{_NUMBER}|"[^"]*"|true|false|{_NAME}(?:\.{_NAME})*)$')
_IRQ = re.compile(rf"^-> (?P<target>{_NAME})@(?P<line>\d+)$")
_INIT_LINE = re.compile(rf"^SilenceRange <{_NUMBER} {_NUMBER}>$")


def _int(text):
    return int(text, 0)


@dataclass
class Registration:
    parent: str
    base: int | None  # None: registered without an address (a CPU)
    size: int | None = None
    region: str | None = None


@dataclass
class Entry:
    name: str
    type: str | None
    lineno: int
    registrations: list = field(default_factory=list)
    properties: dict = field(default_factory=dict)
    irqs: list = field(default_factory=list)  # (target, line)
    init: list = field(default_factory=list)


def _split_registrations(text):
    """``{ a; b }`` into ``[a, b]`` (braces inside a registration are kept), or ``[text]``."""
    if not text.startswith("{"):
        return [text]
    if not text.endswith("}") or not text.startswith("{ ") or not text.endswith(" }"):
        raise ValueError("a registration list is written { reg; reg }")
    parts, depth, current = [], 0, ""
    for ch in text[2:-2]:
        if ch == ";" and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            raise ValueError("unbalanced braces")
        current += ch
    if depth:
        raise ValueError("unbalanced braces")
    parts.append(current.strip())
    return parts


def _registration(text):
    for pattern in (_SIMPLE_REG, _MULTI_REG):
        m = pattern.match(text)
        if m:
            d = m.groupdict()
            base = d.get("base") or d.get("addr")
            return Registration(
                d["parent"], _int(base) if base else None, _int(d["size"]) if d.get("size") else None, d.get("region")
            )
    raise ValueError(f"{text!r} is not a registration")


def parse_repl(text):
    """``{name: Entry}`` of a platform description; :class:`SyntaxProblem` on anything else."""
    entries, current, in_init = {}, None, False

    def fail(lineno, message):
        raise SyntaxProblem(".repl", lineno, message)

    for lineno, line in enumerate(text.split("\n"), 1):
        if "\t" in line:
            fail(lineno, "tab character (indent with 4 spaces)")
        if line != line.rstrip():
            fail(lineno, "trailing whitespace")
        stripped = line.strip()
        if not stripped:
            current, in_init = None, False  # a blank line ends an entry's block
            continue
        if stripped.startswith("//"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            m = _ENTRY.match(line)
            if not m:
                fail(lineno, f"expected `name: Type @ registration`, got {line!r}")
            name, type_, where = m.group("name", "type", "where")
            if type_ is None and where is not None:
                fail(lineno, "a registration needs a type")
            if type_ is not None and name in entries:
                fail(lineno, f"{name} is defined twice")
            if type_ is None and name != "sysbus" and name not in entries:
                fail(lineno, f"{name} is updated before it is defined")
            current = entries.setdefault(name, Entry(name, type_, lineno))
            in_init = False
            if where is not None:
                try:
                    current.registrations = [_registration(r) for r in _split_registrations(where)]
                except ValueError as e:
                    fail(lineno, str(e))
            continue
        if current is None:
            fail(lineno, "indented line outside an entry")
        body = line[indent:]
        if indent == len(INDENT):
            in_init = False
            if body in ("init:", "init add:"):
                in_init = True
            elif m := _IRQ.match(body):
                current.irqs.append((m["target"], int(m["line"])))
            elif m := _PROPERTY.match(body):
                if m["key"] in current.properties:
                    fail(lineno, f"property {m['key']} set twice")
                current.properties[m["key"]] = m["value"]
            else:
                fail(lineno, f"expected `key: value`, `-> target@line` or `init:`, got {body!r}")
        elif indent == 2 * len(INDENT) and in_init:
            if not _INIT_LINE.match(body):
                fail(lineno, f"unsupported init command {body!r}")
            current.init.append(body)
        else:
            fail(lineno, f"indentation of {indent} spaces does not open a block here")

    for entry in entries.values():
        for reg in entry.registrations:
            if reg.parent != "sysbus" and reg.parent not in entries:
                raise SyntaxProblem(".repl", entry.lineno, f"{entry.name} is registered at unknown {reg.parent}")
        for target, _ in entry.irqs:
            if target not in entries:
                raise SyntaxProblem(".repl", entry.lineno, f"{entry.name} connects to unknown {target}")
    return entries


# --- .resc ----------------------------------------------------------------------------------------

_VARIABLE = re.compile(rf"^\$(?P<name>{_NAME})(?P<op>\?=|=)(?P<value>\S+)$")
#: A path: ``@path``, or ``$ORIGIN/path`` (the script's folder; Renode expands a variable followed
#: by more path, but not one inside an ``@`` path: ``@$ORIGIN/file`` names a file called that).
_PATH = r"(?:@[^$\s]+|\$ORIGIN/\S+)"
_VALUE = re.compile(rf'^(?:{_PATH}|\${_NAME}|"[^"]*"|{_NUMBER})$')
#: What ``$name?=`` and ``$name=`` take: Renode stores a variable on the right unexpanded.
_ASSIGNED = re.compile(rf'^(?:{_PATH}|"[^"]*"|{_NUMBER})$')
#: The one Python line the ring script runs: loading an assembly by name.
_PYTHON = re.compile(r"""^python "import clr; clr\.AddReference\('[A-Za-z.]+'\)"$""")
_STRING = re.compile(r'^"([^"]+)"$')


@dataclass
class Command:
    lineno: int
    machine: str | None  # the machine it applies to, None for emulation-wide commands
    words: list


@dataclass
class Script:
    headers: dict
    variables: dict
    commands: list
    machines: list  # in creation order
    externals: list

    def machine_commands(self, machine):
        return [c.words for c in self.commands if c.machine == machine]


def _words(text):
    words = re.findall(r'"[^"]*"|\S+', text)
    if "".join(words).count('"') % 2 or text.count('"') % 2:
        raise ValueError("unbalanced quotes")
    return words


def parse_resc(text):
    """A :class:`Script` of a ring script; :class:`SyntaxProblem` on anything unknown or misplaced."""
    headers, variables, commands, machines, externals = {}, {}, [], [], []
    machine = None
    seen_command = False

    def fail(lineno, message):
        raise SyntaxProblem(".resc", lineno, message)

    def check_value(lineno, value):
        if "@$" in value:
            fail(lineno, f"{value!r}: Renode does not expand a variable inside an @ path (write $ORIGIN/...)")
        if not _VALUE.match(value):
            fail(lineno, f"{value!r} is not a path (@... or $ORIGIN/...), variable, string or number")
        if value.startswith("$") and not value.startswith("$ORIGIN/") and value[1:] not in variables:
            fail(lineno, f"variable {value} is used before it is set")

    for lineno, line in enumerate(text.split("\n"), 1):
        if line != line.strip():
            fail(lineno, "leading or trailing whitespace")
        if not line or line.startswith("#"):
            continue
        if line.startswith(":"):
            m = re.match(r"^:(name|description): (.+)$", line)
            if not m or seen_command or variables:
                fail(lineno, "headers are `:name: ...` and `:description: ...`, before anything else")
            headers[m[1]] = m[2]
            continue
        if line.startswith("$"):
            m = _VARIABLE.match(line)
            if not m:
                fail(lineno, f"expected `$name?=value`, got {line!r}")
            check_value(lineno, m["value"])
            if not _ASSIGNED.match(m["value"]):
                fail(
                    lineno,
                    f"${m['name']} is given {m['value']}: Renode keeps a variable on the right "
                    f"of = and ?= unexpanded (give a path, string or number)",
                )
            variables[m["name"]] = m["value"]
            continue
        seen_command = True
        if line.startswith("python "):
            if not _PYTHON.match(line) or machine is not None:
                fail(lineno, "the only Python line is loading an assembly by name, before the machines")
            commands.append(Command(lineno, None, ["python", line[len("python ") :]]))
            continue
        try:
            words = _words(line)
        except ValueError as e:
            fail(lineno, str(e))
        head, args = words[0], words[1:]
        for arg in args:
            if arg.startswith(("$", "@")):
                check_value(lineno, arg)
        if head == "include" and len(args) == 1 and re.match(rf"^{_PATH}$", args[0]):
            pass
        elif head == "emulation" and args and re.match(rf"^{_NAME}$", args[0]):
            if args[0].startswith("Create"):
                if (
                    len(args) not in (2, 3)
                    or not _STRING.match(args[1])
                    or not re.match(rf"^(?:{_NUMBER})?$", "".join(args[2:]))
                ):
                    fail(lineno, f"emulation {args[0]} takes one quoted name (and a number)")
                externals.append(args[1].strip('"'))
            elif machine is not None:
                fail(lineno, "emulation settings come before the machines")
        elif head == "mach":
            if args[:1] == ["create"] and len(args) == 2 and _STRING.match(args[1]):
                machine = args[1].strip('"')
                if machine in machines:
                    fail(lineno, f"machine {machine} created twice")
                machines.append(machine)
            elif args[:1] == ["set"] and len(args) == 2 and args[1].strip('"') in machines:
                machine = args[1].strip('"')
            elif args == ["clear"]:
                machine = None
            else:
                fail(lineno, f"unknown mach command {line!r}")
            continue
        elif head in ("machine", "sysbus", "cpu", "connector") or head.startswith("sysbus."):
            if machine is None:
                fail(lineno, f"{head} needs a current machine (mach create/set)")
            if head == "connector":
                if len(args) != 3 or args[0] != "Connect" or args[2] not in externals:
                    fail(lineno, "expected `connector Connect <peripheral> <created external>`")
            elif head == "cpu" and not (len(args) == 2 and args[0] == "PC" and re.match(rf"^{_NUMBER}$", args[1])):
                fail(lineno, "expected `cpu PC <address>`")
            elif len(args) < 1:
                fail(lineno, f"{head} needs a command")
        else:
            fail(lineno, f"unknown command {head!r}")
        commands.append(Command(lineno, machine, words))
    return Script(headers, variables, commands, machines, externals)
