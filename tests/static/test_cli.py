"""The command line: default example, hash, diff, formats, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flydeps.cli import main
from flydeps.keys.fingerprint import transitive_digests
from flydeps.static.analyze import analyze

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundled_example_graph(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["graph", "examples/kernels", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernels.attention.flash:compile_flash_attention  [factory]")
    assert "[kernel]" in out and "[launcher]" in out and "\x1b[" not in out


def test_main_called_from_python_leaves_the_flydeps_logger_as_it_was(capsys, monkeypatch) -> None:
    """``main()`` called in-process (a build script, a notebook, these tests) logs to the
    ``sys.stderr`` of the call, then leaves the ``flydeps`` logger's handlers, level and
    propagation as it found them. Before, its stderr handler stayed, bound to that call's
    stream: a later INFO record of the library (a rebuild reason, with FLYDEPS_LOG unset)
    went to stderr, or failed with "I/O operation on closed file" once that stream was closed
    (pytest's capture of an earlier test did exactly that)."""
    import logging

    monkeypatch.chdir(ROOT)
    logger = logging.getLogger("flydeps")
    before = (list(logger.handlers), logger.level, logger.propagate)
    assert main(["hash", "examples/kernels/attention/flash.py::nope"]) == 1  # logs an error
    assert "nope" in capsys.readouterr().err
    assert (list(logger.handlers), logger.level, logger.propagate) == before
    logger.info("a library record after the command")
    assert "a library record" not in capsys.readouterr().err


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flydeps", "graph", "examples/kernels/norm", "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "flydeps.graph/1"
    assert "kernels.norm.rmsnorm:NormKernelBase.build@kernels.norm.rmsnorm:RMSNormKernel" in doc["roots"]


def test_hash_is_the_transitive_digest_of_the_root(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    target = "examples/kernels/attention/flash.py::compile_row_reduce"
    assert main(["hash", target]) == 0
    printed = capsys.readouterr().out.strip()
    graph = analyze([target]).graph
    assert printed == transitive_digests(graph)[graph.roots[0]]


def test_unknown_qualname_is_an_analysis_error(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["hash", "examples/kernels/attention/flash.py::nope"]) == 1
    assert "no function or class 'nope' here; try one of: " in capsys.readouterr().err


def test_pycg_names_builtins_and_nested_functions(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "cg.json"
    assert (
        main(
            [
                "graph",
                "examples/kernels/attention/flash.py::compile_flash_attention",
                "--format",
                "pycg",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    cg = json.loads(out.read_text())
    mask = cg["kernels.attention.flash.compile_flash_attention._mask"]
    assert "<builtin>.enumerate" in mask and "flydsl.expr.select" in mask
    kernel = cg["kernels.attention.flash.compile_flash_attention.flash_attention_kernel"]
    assert "kernels.common.mem.load_tile" in kernel


def test_diff_outside_a_git_repository_is_a_usage_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "HEAD"]) == 2
    assert "flydeps diff: git" in capsys.readouterr().err


def test_call_cycles_are_marked_in_the_tree(tmp_path, capsys) -> None:
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(
        "def even(n):\n    return n == 0 or odd(n - 1)\n\n\ndef odd(n):\n    return n != 0 and even(n - 1)\n"
    )
    assert main(["graph", f"{pkg}/m.py::even", "--no-cache", "--color", "never"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cyc.m:even  cyc/m.py:1  ")
    assert lines[1].startswith("└── odd  cyc/m.py:5  ")
    assert lines[2].startswith("    └── even  cyc/m.py:1  ") and lines[2].endswith("(cycle)")


def test_unwritable_output_is_a_usage_error(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["graph", "examples/kernels/norm", "-o", str(tmp_path / "missing-dir" / "out.txt")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_colour_marks_roles_only_when_asked(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["graph", "examples/kernels/norm", "--color", "always"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[1;35m[kernel]\x1b[0m" in out and "\x1b[m" not in out


# --- issue 11: deep chains, legend, messages, --version, error handling -------------------


def _chain(tmp_path: Path, depth: int) -> Path:
    """``f0 -> f1 -> ... -> f<depth>``: a call chain ``depth`` edges deep."""
    body = "".join(f"def f{i}():\n    return f{i + 1}()\n\n\n" for i in range(depth))
    path = tmp_path / "chain.py"
    path.write_text(body + f"def f{depth}():\n    return 0\n")
    return path


def test_deep_chain_tree_is_linear_and_every_node_is_drawn_once(tmp_path, capsys) -> None:
    """A 2000-deep chain took 4 x depth bytes of indentation per line (8 MB here, 32 MB at
    4000, MemoryError at 20,000); cut into blocks it stays linear and complete."""
    from flydeps.static.report import MAX_TREE_DEPTH

    depth = 2000
    path = _chain(tmp_path, depth)
    out = tmp_path / "tree.txt"
    assert main(["graph", f"{path}::f0", "--no-cache", "--color", "never", "-o", str(out)]) == 0
    text = out.read_text()
    assert len(text) < 200 * depth  # the old tree: ~8,000,000 bytes
    lines = [line for line in text.splitlines() if line and not line.startswith(("1 root", "Legend"))]
    names = [line.lstrip("│├└─ ").split()[0].removeprefix("chain:") for line in lines]
    assert sorted(set(names)) == sorted(f"f{i}" for i in range(depth + 1))  # nothing lost
    heads = [line for line in lines if line.endswith("(continued)")]
    cuts = [line for line in lines if line.endswith("(continued below)")]
    assert len(heads) == len(cuts) == (depth - 1) // MAX_TREE_DEPTH  # f32, f64, ... start blocks
    for cut, head in zip(cuts, heads, strict=True):  # each cut is the next block's first line
        assert cut.lstrip("│├└─ ").split()[0] == head.split()[0].removeprefix("chain:")
    assert max(len(line) for line in lines) < 4 * MAX_TREE_DEPTH + 100
    assert text.rstrip().endswith("1 root, 2001 nodes (0 external, 0 unresolved), 2000 edges")


def test_legend_explains_every_marker_the_tree_shows(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT / "tests" / "static" / "fixtures")
    assert main(["graph", "kernelrepo", "--no-cache", "--color", "never", "--legend"]) == 0
    tree, _, legend = capsys.readouterr().out.partition("\nLegend:\n")
    keys = {line.strip().split("  ")[0] for line in legend.splitlines() if line.strip()}
    shown = {
        "#default.": "f#default.x",
        "#decorator.": "f#decorator.N",
        "@kernelrepo.": "m@mod:Sub",
        ".<locals>.": "f.<locals>.g",
        "[static-expression]": "[static-expression]",
        "[factory]": "[factory]",
        "external: ": "external: a, b",
        "unresolved: ": "unresolved: why",
        "  = ": "= text",
        "(see above)": "(see above)",
        "(cycle)": "(cycle)",
        "(closure": "(kind label)",
    }
    for marker, key in shown.items():
        assert marker in tree, marker  # the fixture shows it ...
        assert key in keys, key  # ... and the legend explains it
    assert "transitive digest" in legend and "(continued below)" in keys
    assert main(["graph", "kernelrepo", "--format", "json", "--legend"]) == 2


def test_summary_line_counts_in_the_right_number(tmp_path, capsys) -> None:
    pkg = tmp_path / "one"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n    return missing_name()\n")
    (pkg / "bad.py").write_text("def broken(:\n")
    assert main(["graph", str(pkg), "--no-cache", "--color", "never"]) == 1
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary == "1 root, 2 nodes (0 external, 1 unresolved), 1 edge; 1 problem"


def test_missing_and_non_python_paths_say_what_they_are(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("# not python\n")
    assert main(["graph", "nope.py", "README.md", "--no-cache"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "README.md: not a Python file; flydeps reads .py files (or a directory of them)",
        "nope.py: no such file or directory",
    ]


def test_version_is_the_installed_distribution(capsys) -> None:
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"flydeps {version('flydeps')}\n"


def test_malformed_targets_are_usage_errors_naming_the_argument(capsys) -> None:
    for target in ("::f", "kernels/x.py::f::g", ""):
        assert main(["hash", target]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("flydeps hash: ") and repr(target) in err[0], err
    assert main(["graph", "::f"]) == 2
    assert "'::f' has no PATH before '::'" in capsys.readouterr().err


def test_bad_setting_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch) -> None:
    path = _chain(tmp_path, 2)
    monkeypatch.setenv("FLYDEPS_MAX_FILE_BYTES", "abc")
    assert main(["graph", str(path), "--no-cache"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("flydeps: FLYDEPS_MAX_FILE_BYTES='abc'"), err


class _InterruptedTerminal:
    """A terminal whose user presses Ctrl-C while the tree is printed."""

    def write(self, text: str) -> int:
        raise KeyboardInterrupt

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_interrupt_exits_130_with_one_line(tmp_path, capsys, monkeypatch) -> None:
    path = _chain(tmp_path, 2)
    monkeypatch.setattr(sys, "stdout", _InterruptedTerminal())
    try:
        status = main(["graph", str(path), "--no-cache"])
    except KeyboardInterrupt:  # escaping main, it would stop this test session too
        pytest.fail("KeyboardInterrupt escaped flydeps.cli.main")
    assert status == 130
    assert capsys.readouterr().err == "flydeps: interrupted\n"


def test_closed_stdout_ends_quietly(tmp_path) -> None:
    """``flydeps graph x | head -1``: the reader has gone before the tree is written."""
    path = _chain(tmp_path, 50)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flydeps", "graph", str(path), "--no-cache"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert err == ""


def test_special_file_named_on_the_command_line_says_what_it_is(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkfifo("pipe.py")  # never opened: reading a FIFO would wait for a writer forever
    os.symlink("/dev/zero", "zero.py")
    assert main(["graph", "pipe.py", "zero.py", "--no-cache"]) == 1
    why = "not a regular file or directory (a FIFO, device, socket or broken link): skipped"
    assert capsys.readouterr().err.splitlines() == [f"pipe.py: {why}", f"zero.py: {why}"]


def test_odd_file_names_stay_on_one_line(tmp_path, capsys, monkeypatch) -> None:
    """A newline or an escape sequence in a file name is escaped in messages and in the tree."""
    monkeypatch.chdir(tmp_path)
    Path("bad\nname.py").write_text("def (:\n")
    Path("esc\x1b[2J.py").write_text("def f():\n    return 1\n")
    assert main(["graph", "bad\nname.py", "esc\x1b[2J.py", "--no-cache", "--color", "never"]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == ["bad\\nname.py:1: syntax error: invalid syntax; fix the file"]
    assert captured.out.splitlines()[0] == "esc\\x1b[2J:f  esc\\x1b[2J.py:1  " + captured.out.split()[2]


def test_graph_without_a_path_analyses_the_current_directory(tmp_path, monkeypatch, capsys) -> None:
    """As ``ruff check`` and ``pytest`` do (issue 38), not some bundled example."""
    (tmp_path / "mine.py").write_text(
        "import functools\n\n\ndef helper(x):\n    return x + 1\n\n\n@functools.lru_cache\n"
        "def compile_mine(n):\n    return helper(n)\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["graph", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "compile_mine" in out and "helper" in out
    assert "examples" not in out


def test_shell_completion_completes_commands_options_and_choices(tmp_path) -> None:
    """``eval "$(flydeps completion bash)"`` (issue 38): the script bash really runs, asked as
    bash asks it (COMP_WORDS / COMP_CWORD), completes subcommands, options and choices."""
    import shutil
    import subprocess
    import sys

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    script = tmp_path / "flydeps.bash"
    done = subprocess.run(
        [sys.executable, "-m", "flydeps", "completion", "bash"], capture_output=True, text=True, check=True
    )
    script.write_text(done.stdout)

    def complete(*words: str) -> set[str]:
        line = " ".join(words)
        quoted = " ".join(f"'{w}'" for w in words)
        probe = (
            f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
            f"COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; "
            f"_shtab_flydeps flydeps '{words[-1]}' '{words[-2]}' 2>/dev/null; printf '%s\\n' \"${{COMPREPLY[@]}}\""
        )
        out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=False).stdout
        return set(out.split())

    assert complete("flydeps", "gr") == {"graph"}
    assert {"diff", "migrate", "hash", "aot", "completion"} <= complete("flydeps", "")
    assert "--format" in complete("flydeps", "graph", "--for")
    assert complete("flydeps", "graph", "--format", "") == {"dot", "json", "mermaid", "pycg", "tree"}
    assert "--exit-code" in complete("flydeps", "diff", "--exit")
    assert main(["completion", "fish"]) == 2  # not a shell shtab writes for
