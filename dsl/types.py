"""Types and units of the rule language.

A dimension is a vector of exponents over (bytes, FLOP, seconds). Every unit
is a dimension and a scale to the base unit; literals are stored in base units.
"""

from dataclasses import dataclass
from fractions import Fraction

Dim = tuple[int, int, int]
NONE: Dim = (0, 0, 0)
BYTES: Dim = (1, 0, 0)
FLOP: Dim = (0, 1, 0)
SECONDS: Dim = (0, 0, 1)


def _unit_table() -> dict[str, tuple[Dim, Fraction]]:
    table: dict[str, tuple[Dim, Fraction]] = {}
    for name in ("count", "tokens", "samples", "params", "steps", "ratio"):
        table[name] = (NONE, Fraction(1))
    for name, scale in (("B", 1), ("bytes", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30),
                        ("TiB", 2**40), ("KB", 10**3), ("MB", 10**6), ("GB", 10**9),
                        ("TB", 10**12)):
        table[name] = (BYTES, Fraction(scale))
    for name, scale in (("FLOP", 1), ("GFLOP", 10**9), ("TFLOP", 10**12), ("PFLOP", 10**15)):
        table[name] = (FLOP, Fraction(scale))
    for name, scale in (("s", Fraction(1)), ("ms", Fraction(1, 10**3)),
                        ("us", Fraction(1, 10**6)), ("h", Fraction(3600))):
        table[name] = (SECONDS, scale)
    for name, scale in (("FLOPS", 1), ("GFLOPS", 10**9), ("TFLOPS", 10**12), ("PFLOPS", 10**15)):
        table[name] = ((0, 1, -1), Fraction(scale))
    for name, scale in (("Bps", 1), ("GBps", 10**9), ("TBps", 10**12)):
        table[name] = ((1, 0, -1), Fraction(scale))
    table["Gbps"] = ((1, 0, -1), Fraction(10**9, 8))
    return table


UNITS = _unit_table()


def dim_name(dim: Dim) -> str:
    if dim == NONE:
        return "a plain number"
    parts = []
    for exp, base in zip(dim, ("bytes", "FLOP", "s")):
        if exp == 1:
            parts.append(base)
        elif exp:
            parts.append(f"{base}^{exp}")
    return "·".join(parts)


def dim_mul(a: Dim, b: Dim) -> Dim:
    return tuple(x + y for x, y in zip(a, b))  # type: ignore[return-value]


def dim_div(a: Dim, b: Dim) -> Dim:
    return tuple(x - y for x, y in zip(a, b))  # type: ignore[return-value]


@dataclass(frozen=True)
class Type:
    """bool, num (with a dimension), str, or enum (with its values)."""

    kind: str
    dim: Dim = NONE
    integral: bool = False
    values: tuple = ()

    def __str__(self) -> str:
        if self.kind == "num":
            base = "int" if self.integral else "num"
            return base if self.dim == NONE else f"{base} in {dim_name(self.dim)}"
        if self.kind == "enum":
            return "enum [" + ", ".join(f'"{v}"' for v in self.values) + "]"
        return self.kind

    @property
    def is_num(self) -> bool:
        return self.kind == "num"

    @property
    def is_textual(self) -> bool:
        return self.kind in ("str", "enum")


BOOL = Type("bool")
STR = Type("str")
INT = Type("num", NONE, True)
NUM = Type("num", NONE, False)


def show_value(value) -> str:
    """A literal as the rule language writes it (for diagnostics)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Fraction):
        return str(value.numerator) if value.denominator == 1 else str(float(value))
    return str(value)
