"""Builds the package strata (pyproject.toml): the extension strata._strata through the
project's CMake build (target strata_python, in build/ or $STRATA_BUILD_DIR, configured
first when it is not), copied beside the pure-Python files of python/strata/."""

import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("STRATA_BUILD_DIR") or os.path.join(ROOT, "build")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   f"-DPython3_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build, "--target", "strata_python", "-j", str(os.cpu_count() or 1)])
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = os.path.join(build, "python", "strata", "_strata" + suffix)
        if not os.path.exists(built):
            found = os.listdir(os.path.join(build, "python", "strata"))
            sys.exit(f"strata: no {built}: the CMake build made the module for another Python ({found}); "
                     f"configure {build} with -DPython3_EXECUTABLE={sys.executable}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


# setuptools' own files (its build tree, the egg-info) go beside CMake's, not into the checkout.
SETUPTOOLS_DIR = os.path.join("build", "setuptools")
os.makedirs(SETUPTOOLS_DIR, exist_ok=True)

setup(
    packages=["strata"],
    package_dir={"strata": "python/strata"},
    ext_modules=[Extension("strata._strata", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": SETUPTOOLS_DIR}, "egg_info": {"egg_base": SETUPTOOLS_DIR}},
)
