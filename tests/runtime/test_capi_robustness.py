"""flydsl_runtime.persist._capi checks what it is given before it calls anything (issue 36, item 7).

``string_ref(library, symbol)`` calls ``symbol`` of an already-loaded library as an
``MlirStringRef f(void)``. Given any other function of any loaded library (libc's
``getpid`` or ``abort`` through the module's own shared object) it crashed the process; it
now calls only the FlyDSL C API functions it knows to have that signature, names them in
a ValueError otherwise, and takes the library only as an absolute path (no search path,
no caller's handle). The calls that crashed run in a child process, so a crash fails the
test instead of ending pytest.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from flydsl_runtime.persist import index

capi = pytest.importorskip("flydsl_runtime.persist._capi", reason="the C helper was not built here")

OWN_LIBRARY = capi.__file__  # loaded (it is this module), absolute, and linked against libc


@pytest.mark.parametrize("symbol", ["getpid", "abort", "malloc", "mlirFlyROCDLGetROCMPat"])
def test_a_function_of_another_signature_is_refused_without_a_call(symbol: str) -> None:
    script = (
        "import sys\nfrom flydsl_runtime.persist import _capi\n"
        "try:\n    _capi.string_ref(sys.argv[1], sys.argv[2])\n"
        "except ValueError as error:\n    print(error)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, OWN_LIBRARY, symbol], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, f"string_ref(own library, {symbol!r}) ended the process (exit {run.returncode})"
    assert f"{symbol!r} is not a FlyDSL C API function" in run.stdout
    assert "known: mlirFlyROCDLGetROCMPath" in run.stdout and "nothing was called" in run.stdout


def test_the_library_is_an_absolute_path_without_nul() -> None:
    with pytest.raises(ValueError, match="library must be an absolute path, got 'libc.so.6'"):
        capi.string_ref("libc.so.6", "mlirFlyROCDLGetROCMPath")
    with pytest.raises(ValueError, match="library must be an absolute path"):
        capi.string_ref("", "mlirFlyROCDLGetROCMPath")
    with pytest.raises(ValueError, match="null"):
        capi.string_ref(OWN_LIBRARY + "\0x", "mlirFlyROCDLGetROCMPath")


def test_arguments_of_other_types_or_counts_are_type_errors() -> None:
    for arguments in [(OWN_LIBRARY.encode(), "mlirFlyROCDLGetROCMPath"), (OWN_LIBRARY, None), (OWN_LIBRARY,), ()]:
        with pytest.raises(TypeError, match=r"string_ref\(library: str, symbol: str\)"):
            capi.string_ref(*arguments)


def test_a_known_name_followed_by_nul_is_refused_not_truncated() -> None:
    """The C string stops at the NUL: dlsym would have found the real function."""
    function = index._rocm_root_function()
    assert function is not None
    library, symbol = function.args  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="is not a FlyDSL C API function"):
        capi.string_ref(library, symbol + "\0anything")
    assert capi.string_ref(library, symbol) == function()


def test_a_known_function_where_it_is_not_is_no_answer() -> None:
    assert capi.string_ref(OWN_LIBRARY, "mlirFlyROCDLGetROCMPath") is None  # loaded, lacks it
    assert capi.string_ref("/nonexistent/libFlyPythonCAPI.so", "mlirFlyROCDLGetROCMPath") is None
