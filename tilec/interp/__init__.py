"""The reference interpreter of Tile IR (the oracle of the tests and `tilec run --device cpu`)."""

from .run import random_inputs, run_kernel, summarize
from .tile_interp import Interpreter, InterpreterError

__all__ = ["Interpreter", "InterpreterError", "random_inputs", "run_kernel", "summarize"]
