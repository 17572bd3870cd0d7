"""The wheel's packages and data files, found from the layout described in numavia.base.paths.

Project metadata is in pyproject.toml; only package discovery is here, because the Python
packages live in four folders mapped into one package (``gateware/`` is ``numavia.gateware``...)
and setuptools' declarative discovery cannot put a folder's packages under another name. Every
folder below each mapped folder is a package (namespace packages included: a folder of Python
files that lacks its ``__init__.py``, or a folder of data), so none can be forgotten.
``firmware/`` and ``renode/`` hold no Python: each is mapped to a package folder of its own under
``numavia/resources/`` and shipped whole as its package data, the standard way to put files
inside an installed package.
"""

import importlib.util
from pathlib import Path

from setuptools import find_namespace_packages, setup

spec = importlib.util.spec_from_file_location("paths", Path(__file__).parent / "host/numavia/base/paths.py")
paths = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paths)

package_dir, packages, package_data = {}, [], {}
for folder, installed in paths.LAYOUT.items():
    name = installed.replace("/", ".")
    package_dir[name] = folder
    packages += [name, *(f"{name}.{sub}" for sub in find_namespace_packages(folder, exclude=["*__pycache__*"]))]
    if folder in paths.DATA:
        package_data[name] = paths.DATA[folder]

setup(packages=packages, package_dir=package_dir, package_data=package_data)
