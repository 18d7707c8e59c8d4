"""The package's metadata is in pyproject.toml. This file only makes its
wheel platform-specific: the package is pure Python (ctypes), but it ships
libcallbox.so (copied in by `make python-lib`), a native library, so the
wheel is tagged py3-none-<platform>, not py3-none-any, and installs into
platlib."""

from setuptools import setup
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:
    from wheel.bdist_wheel import bdist_wheel  # Debian 12: python3-wheel


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": PlatformWheel})
