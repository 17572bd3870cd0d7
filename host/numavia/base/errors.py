"""The base of every error the ``numavia`` tools report to users as one line."""


class NumaviaError(RuntimeError):
    """A step failed for a reason the message states in one line."""
