"""Installs the simulation profiles (the repository's ``simulations/*.toml``) with the package.

Everything else is in pyproject.toml.  A regular install or a wheel carries a copy of the
profiles as ``gmtheory/simulations/profiles/``; an editable install (``make``,
``pip install -e``) reads the repository's folder itself
(:func:`gmtheory.simulations._base.profiles_dir`).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithProfiles(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        dest = Path(self.build_lib) / "gmtheory" / "simulations" / "profiles"
        self.mkpath(str(dest))
        for src in sorted(Path(__file__).resolve().parent.glob("simulations/*.toml")):
            self.copy_file(str(src), str(dest / src.name))


setup(cmdclass={"build_py": BuildWithProfiles})
