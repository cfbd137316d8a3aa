"""The one exception type for mistakes a user can fix (bad file, bad option, bad model path).

The CLI prints its message as one sentence and exits non-zero; anything else is a bug and
keeps its traceback.
"""


class PddkitError(Exception):
    """A user-facing error: its message is one clear sentence naming the file, line or sample."""


# what each optional extra of pyproject.toml installs, for the sentence that asks for it
_EXTRAS = {"hub": "datasets huggingface_hub", "zh": "jieba", "tables": "pyarrow",
           "adapters": "peft", "lora": "peft", "quantize": "bitsandbytes", "ray": "'ray[data]'"}


def install_hint(extra: str) -> str:
    """How to install an optional extra: pddkit is installed from a checkout, not from PyPI,
    so the sentence names both the extra and the packages it stands for."""
    return (f"`pip install {_EXTRAS[extra]}` (the extra `{extra}`: `pip install -e '.[{extra}]'` "
            "in pddkit's checkout)")
