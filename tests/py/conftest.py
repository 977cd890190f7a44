"""Shared pytest setup: make the in-repo Python package importable and locate the build."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("NNF_LIB", str(ROOT / "build" / "libnnfuse.so"))
NNF_BIN = os.environ.get("NNF_BIN", str(ROOT / "build" / "nnfuse"))
