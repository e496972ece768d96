"""The `sandesh` package of an editable install (`pip install -e .`; README, "Developers"): the
checkout's own folders, as the wheel installs them under `sandesh/`.  hatchling's editable
wheel puts this folder on sys.path (pyproject.toml, `dev-mode-dirs`), and this package's path is
the checkout's root, so `sandesh.domain` is ./domain, `sandesh.api` ./api, and so on."""
import os

__path__ = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))]
