"""Package layout and the optional C accelerator; all metadata is in pyproject.toml.

The repository keeps the client's layout (``diag/``, ``probes/``, ``reports/``, ``runbooks/``);
installed, it is the one import package ``llmdiag``: ``diag/`` is ``llmdiag`` itself and the
other three are ``llmdiag.probes``, ``llmdiag.reports`` and ``llmdiag.runbooks``. Nothing else
lands at the top level of site-packages (tests/unit/test_packaging.py reads the wheel's RECORD).

The extension is ``optional=True``: without a C compiler the install still succeeds, and
analyze-log uses its pure-Python bulk path (diag/logs/bulk.py), with the same results, slower.
"""

from setuptools import Extension, find_packages, setup

#: import name -> directory in the repository
PACKAGE_DIR = {
    "llmdiag": "diag",
    "llmdiag.probes": "probes",
    "llmdiag.reports": "reports",
    "llmdiag.runbooks": "runbooks",
}


def packages() -> list[str]:
    found = []
    for name, directory in PACKAGE_DIR.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(directory)]
    # data only (the JSON Schemas of the documents): listed so that setuptools ships it without
    # its "Package would be ignored" warning about a directory without __init__.py
    found.append("llmdiag.schemas")
    return found


setup(
    package_dir=PACKAGE_DIR,
    packages=packages(),
    ext_modules=[Extension("llmdiag.logs._fastscan", ["diag/logs/_fastscan.c"], optional=True)],
)
