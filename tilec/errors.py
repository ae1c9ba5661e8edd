"""Errors that are the user's to fix (bad arguments, no GPU, a kernel reading out of bounds), as
opposed to compiler bugs. The CLI prints them as `tilec: error: ...` and exits 1."""


class UserFacingError(Exception):
    pass
