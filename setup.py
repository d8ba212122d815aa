"""The one compiled module: the index map's batch update (ledger/vindex/_ctrie.c), with
OpenSSL's SHA-256. Optional: where it cannot be built (no C compiler, no OpenSSL headers)
the install goes on and the index runs the same update in Python (ledger/vindex/_map.py).
Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "ledger.vindex._ctrie", ["ledger/vindex/_ctrie.c"], libraries=["crypto"],
    extra_compile_args=["-Wno-deprecated-declarations"], optional=True)])
