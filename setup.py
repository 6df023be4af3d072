"""Only the optional C accelerator of analyze-log lives here; everything else is in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds, and analyze-log uses its
pure-Python bulk path (probes/logs/bulk.py), which gives the same results more slowly.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("probes.logs._fastscan", ["probes/logs/_fastscan.c"], optional=True)])
