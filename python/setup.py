"""Builds ravel._fast (ravel/_fast.c), the compiled hot path of a recursive
model's call, with the package when it can: optional, so `pip install
./python` still installs the pure Python package where there is no C
compiler, no Python headers, or no include/ravel.h beside this directory
(the package then uses ctypes only). Everything else is pyproject.toml's."""
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(HERE, os.pardir, "include")

ext = []
if os.path.exists(os.path.join(INCLUDE, "ravel.h")):
    ext.append(Extension("ravel._fast", ["ravel/_fast.c"], include_dirs=[INCLUDE],
                         extra_compile_args=["-std=c11"], optional=True))
setup(ext_modules=ext)
