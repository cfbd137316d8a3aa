"""The one exception type for mistakes a user can fix (bad file, bad option, bad model path).

The CLI prints its message as one sentence and exits non-zero; anything else is a bug and
keeps its traceback.
"""


class PddkitError(Exception):
    """A user-facing error: its message is one clear sentence naming the file, line or sample."""
