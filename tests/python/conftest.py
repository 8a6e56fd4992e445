"""Fixtures for the Python package's tests.

The package under test is the build tree's (``<build>/python``: the extension and links to
python/streamline/*.py): $SL_PYTHON_DIR, else <repo>/build/python. A missing build is an import
failure, never a skip.
"""

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = Path(os.environ.get("SL_PYTHON_DIR", REPO / "build" / "python"))
sys.path.insert(0, str(PYTHON_DIR))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import models  # noqa: E402


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def add_path(model_dir):
    return models.save(models.add_model(), model_dir / "add.onnx")


@pytest.fixture(scope="session")
def cnn_path(model_dir):
    return models.save(models.branchy_cnn(), model_dir / "branchy.onnx")


@pytest.fixture(scope="session")
def gather_path(model_dir):
    return models.save(models.gather_model(), model_dir / "gather.onnx")


@pytest.fixture(scope="session")
def chain_path(model_dir):
    return models.save(models.matmul_chain(), model_dir / "chain.onnx")
