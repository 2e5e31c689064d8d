"""Property tests of the code digest (issue 8): generated functions, judged by oracles
that are not the digest.

* Pairs of generated functions (one choice of the generator changed): when ``dis``'s
  instruction tuples (positions and filler stripped; constants, names and variables by
  value) or the variable tables differ, the digests differ; when they are equal, the digests are equal. When
  the two functions *behave* differently (calls they make, with which keyword names,
  what they return or raise), both the structure and the digests differ.
* One generated function rendered with different layout (moved down, comments, blank
  lines, a docstring, expressions split over lines): equal digests; with
  ``positions=True`` the digests differ exactly when a line or column moved.
"""

from __future__ import annotations

import dis
import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType, SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from flydeps.code.bytecode import code_digest, find_code, is_function_code, qualname_of

KEYWORDS = ("src", "dst", "k")
CONSTANTS = (
    "0",
    "1",
    "2",
    "-1",
    "0.0",
    "-0.0",
    "1.0",
    "True",
    "False",
    "None",
    "'x'",
    "'y'",
    "b'z'",
    "(1, 2)",
    "(2, 1)",
)
BINARY = ("+", "-", "//", "%", "|", "&", "^", ">>")
COMPARE = ("==", "!=", "<", "<=", ">", ">=", "is", "is not", "in", "not in")
CONVERSIONS = ("", "!r", "!s", "!a")
SPECS = ("", ":>4", ":<4", ":^4")
VARIABLES = ("a", "b", "c", "v", "w")  # arguments, a local, two closure cells
EXCEPTIONS = ("ValueError", "TypeError", "ZeroDivisionError")


@dataclass(frozen=True)
class Layout:
    """How a program is written; none of it is executable code."""

    lines_above: int = 0
    docstring: bool = False
    comment_lines: bool = False  # a comment line before every statement
    trailing_comments: bool = False  # a comment after every statement, same line
    blank_lines: bool = False
    split_expressions: bool = False  # every expression parenthesized over two lines


class Program:
    """Renders a function from a list of choices; changing one choice changes the program."""

    def __init__(self, choices: list[int], layout: Layout = Layout()) -> None:
        self.choices, self.cursor, self.layout = choices, 0, layout

    def pick(self, options: int) -> int:
        """The next choice (0 once the list is used up): one changed choice is one local edit."""
        value = self.choices[self.cursor] if self.cursor < len(self.choices) else 0
        self.cursor += 1
        return value % options

    def expr(self, depth: int = 2) -> str:
        text = self._expr(depth)
        return f"(\n{text}\n)" if self.layout.split_expressions else text

    def _expr(self, depth: int) -> str:
        kind = self.pick(11 if depth > 0 else 3)
        if kind == 0:
            return VARIABLES[self.pick(len(VARIABLES))]
        if kind == 1:
            return CONSTANTS[self.pick(len(CONSTANTS))]
        if kind == 2:
            return f"o.{('x', 'y')[self.pick(2)]}"
        sub = depth - 1
        if kind == 3:
            return f"({self._expr(sub)} {BINARY[self.pick(len(BINARY))]} {self._expr(sub)})"
        if kind == 4:
            return f"({self._expr(sub)} {COMPARE[self.pick(len(COMPARE))]} {self._expr(sub)})"
        if kind == 5:
            return self.call(sub)
        if kind == 6:
            conversion, spec = CONVERSIONS[self.pick(4)], SPECS[self.pick(4)]
            # Quote-free operands: before 3.12 an f-string cannot nest its own quotes.
            operand = (*VARIABLES, "o.x", "0", "-1", "0.0", "-0.0", "True", "None")[self.pick(11)]
            return f"f'<{{{operand}{conversion}{spec}}}>'"
        if kind == 7:
            return f"({('-', 'not ', '~')[self.pick(3)]}{self._expr(sub)})"
        if kind == 8:
            return f"({self._expr(sub)})[{('0:1', '1:', '::2', '0')[self.pick(4)]}]"
        if kind == 9:
            return f"({self._expr(sub)} {('and', 'or')[self.pick(2)]} {self._expr(sub)})"
        return f"[{self._expr(sub)} for i in range({self.pick(3)})]"

    def call(self, depth: int) -> str:
        args = [self._expr(depth) for _ in range(self.pick(3))]
        names = list(itertools.permutations(KEYWORDS, self.pick(3)))
        chosen = names[self.pick(len(names))]
        args += [f"{name}={self._expr(depth)}" for name in chosen]
        return f"{('g', 'h')[self.pick(2)]}({', '.join(args)})"

    def block(self, indent: str, depth: int) -> list[str]:
        return [line for _ in range(1 + self.pick(2)) for line in self.statement(indent, depth)]

    def statement(self, indent: str, depth: int) -> list[str]:
        kind = self.pick(7 if depth > 0 else 3)
        inner = indent + "    "
        if kind == 0:
            lines = [f"{indent}c = {self.expr()}"]
        elif kind == 1:
            lines = [f"{indent}{self.call(1)}"]
        elif kind == 2:
            lines = [f"{indent}c {BINARY[self.pick(len(BINARY))]}= {self.expr()}"]
        elif kind == 3:
            lines = [f"{indent}if {self.expr()}:", *self.block(inner, depth - 1), f"{indent}else:"]
            lines += self.block(inner, depth - 1)
        elif kind == 4:
            lines = [f"{indent}for i in range(2):", *self.block(inner, depth - 1)]
            lines.append(f"{inner}{('break', 'continue', 'c = i')[self.pick(3)]}")
        elif kind == 5:
            lines = [f"{indent}try:", *self.block(inner, depth - 1)]
            lines += [f"{indent}except {EXCEPTIONS[self.pick(3)]}:", *self.block(inner, depth - 1)]
        else:
            lines = [f"{indent}a, b = {self.expr(1)}, {self.expr(1)}"]
        return self._decorate(lines, indent)

    def _decorate(self, lines: list[str], indent: str) -> list[str]:
        out = []
        if self.layout.comment_lines:
            out.append(f"{indent}# a comment")
        if self.layout.blank_lines:
            out.append("")
        if self.layout.trailing_comments:  # not after an opening parenthesis: comments end lines
            lines = [line if line.endswith("(") else line + "  # note" for line in lines]
        return out + lines

    def source(self) -> str:
        body = ["        c = a", *self.block("        ", 2), f"        return {self.expr()}"]
        head = ["# moved down"] * self.layout.lines_above + ["def make(v, w):", "    def f(a, b):"]
        if self.layout.docstring:
            head.append('        """A docstring, not code."""')
        return "\n".join([*head, *body, "    return f", ""])


def _compile(source: str) -> CodeType:
    with warnings.catch_warnings():  # generated code compares literals with ``is``: legal, and warned
        warnings.simplefilter("ignore", SyntaxWarning)
        # ``~True`` folded by the compiler: deprecated since 3.12, still compiled (the program's
        # bytecode is what is tested, never its result)
        warnings.filterwarnings("ignore", "Bitwise inversion '~' on bool", DeprecationWarning)
        return compile(source, "gen.py", "exec", dont_inherit=True)


def compiled(source: str) -> CodeType:
    code = find_code(_compile(source), "make.<locals>.f")
    assert code is not None
    return code


def structure(code: CodeType) -> tuple:
    """``dis`` tuples without positions or filler, constants read from ``co_consts`` by the
    instruction's own index (3.11's ``dis`` leaves ``KW_NAMES`` unresolved), and the
    variable tables. Names and constants no instruction uses (left by dead-code
    elimination) are not behaviour and not compared."""
    indexed = set(dis.hasname) | set(dis.haslocal) | set(dis.hasfree)
    instructions = tuple(
        (i.opname, _constant(code.co_consts[i.arg]))
        if i.opcode in dis.hasconst and i.arg is not None
        else (i.opname, i.argrepr, None if i.opcode in indexed else i.arg)
        for i in dis.get_instructions(code)
        if i.opname not in ("NOP", "CACHE", "EXTENDED_ARG")
    )
    return (
        instructions,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_argcount,
        code.co_flags,
    )


def _constant(value: object) -> object:
    if isinstance(value, CodeType):  # functions are nodes of their own; the rest is folded in
        return ("function", qualname_of(value)) if is_function_code(value) else structure(value)
    if isinstance(value, tuple):
        return ("tuple", tuple(_constant(v) for v in value))
    return (type(value).__name__, repr(value))


INPUTS = [(1, 2, 3, 4), (0, -1, "x", 2.5), ("s", "t", 0, 1), (-0.0, True, (1, 2), None)]


def behaviour(source: str) -> list:
    """What the generated function does on a few inputs: its calls, results and errors."""
    trace: list = []

    def recorder(name: str) -> Callable[..., int]:
        def record(*args: object, **kwargs: object) -> int:
            trace.append((name, repr(args), repr(list(kwargs.items()))))
            return len(trace)

        return record

    namespace: dict[str, Any] = {"g": recorder("g"), "h": recorder("h"), "o": SimpleNamespace(x=3, y="q")}
    exec(_compile(source), namespace)
    for v, w, a, b in INPUTS:
        try:
            trace.append(("return", repr(namespace["make"](v, w)(a, b))))
        except Exception as error:  # noqa: BLE001 - the exception type is the observable
            trace.append(("raise", type(error).__name__))
    return trace


choices = st.lists(st.integers(0, 2**16), min_size=1, max_size=80)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(choices, st.integers(0, 79), st.integers(1, 2**16))
def test_code_that_differs_digests_differently(base: list[int], at: int, delta: int) -> None:
    mutant = list(base)
    mutant[at % len(base)] += delta
    a, b = Program(base).source(), Program(mutant).source()
    assume(a != b)
    code_a, code_b = compiled(a), compiled(b)
    if behaviour(a) != behaviour(b):
        assert structure(code_a) != structure(code_b)
        assert code_digest(code_a) != code_digest(code_b), (a, b)
    if structure(code_a) != structure(code_b):
        assert code_digest(code_a) != code_digest(code_b), (a, b)
    else:
        assert code_digest(code_a) == code_digest(code_b), (a, b)


layouts = st.builds(
    Layout,
    lines_above=st.integers(0, 3),
    docstring=st.booleans(),
    comment_lines=st.booleans(),
    trailing_comments=st.booleans(),
    blank_lines=st.booleans(),
    split_expressions=st.booleans(),
)


@SETTINGS
@given(choices, layouts)
@example(  # 3.10 shared an exit block with the block falling into it only in the split layout
    base=[1, 864, 0, 0, 0, 1138],
    layout=Layout(
        lines_above=0,
        docstring=False,
        comment_lines=False,
        trailing_comments=False,
        blank_lines=False,
        split_expressions=True,
    ),
)
def test_layout_never_changes_the_digest(base: list[int], layout: Layout) -> None:
    plain, written = Program(base).source(), Program(base, layout).source()
    code_plain, code_written = compiled(plain), compiled(written)
    assert behaviour(plain) == behaviour(written)
    assert code_digest(code_written) == code_digest(code_plain), (plain, written)
    moved = layout.lines_above or layout.docstring or layout.comment_lines or layout.blank_lines
    if moved or layout.split_expressions:  # lines (or columns) of the code changed
        assert code_digest(code_written, positions=True) != code_digest(code_plain, positions=True)
    elif layout.trailing_comments:  # comments after the code: no position moves
        assert code_digest(code_written, positions=True) == code_digest(code_plain, positions=True)
