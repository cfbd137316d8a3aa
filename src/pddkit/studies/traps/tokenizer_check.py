"""`traps detect`'s check of the target's tokenizer against the traps' (Meeus et al. 2024,
"Copyright Traps for Large Language Models"): the authors generate with LLaMA-2 and detect
in CroissantLLM, so another tokenizer is a notice, never a refusal."""

from __future__ import annotations

import logging

from pddkit.errors import PddkitError
from pddkit.studies.traps.folder import TrapFolder

logger = logging.getLogger(__name__)


def tokenizer_of(target, revision, trust_remote_code: bool, local_files_only: bool,
                 adapter: str | None = None):
    """The target's tokenizer (with `adapter`: the one it is loaded with), without loading
    its weights when it is a name."""
    if isinstance(target, str):
        from pddkit.backends.hf_tokenizers import load_tokenizer_view

        return load_tokenizer_view(target, trust_remote_code=trust_remote_code,
                                   local_files_only=local_files_only, revision=revision,
                                   adapter=adapter).tokenizer
    tok = getattr(target, "tokenizer", None)
    if tok is None:
        tok = getattr(getattr(target, "lm", None), "tokenizer", None)
    if tok is None:
        raise PddkitError(f"`model` {getattr(target, 'name', target)} exposes no tokenizer to "
                          "check the traps' token lengths with")
    return tok


def check_tokenizer(folder: TrapFolder, traps: list, tokenizer, model_name: str,
                    where: str, notices: list[str]) -> tuple[dict[str, int], dict]:
    """(trap id -> its length re-encoded with the target's `tokenizer`, the tokenizer
    record results.json keeps). Never a refusal: a publisher testing a third party's model
    tests it with another tokenizer than the traps' (the authors generate with LLaMA-2 and
    detect in CroissantLLM, decoding with one tokenizer and re-encoding with the other,
    notebooks/table_2_mia_auc.ipynb). A folder whose manifest names another tokenizer is a
    notice; traps that re-encode to other lengths are counted in a notice and keep their
    generated length L (cells stay keyed by it), their count under the target's tokenizer
    being in scores.jsonl ('tokens')."""
    from pddkit.cache.fingerprint import tokenizer_digest

    tokens = {t.id: len(tokenizer(t.text, add_special_tokens=False)["input_ids"]) for t in traps}
    off = [t for t in traps if tokens[t.id] != t.length]
    want = folder.tokenizer_fingerprint
    have = tokenizer_digest(tokenizer)
    made = (folder.manifest.get("tokenizer") or {}).get("name") or folder.manifest.get("model")
    record = {"generating": made, "generating_fingerprint": want, "target": model_name,
              "target_fingerprint": have, "same": None if want is None else want == have}
    example = (f" (e.g. {off[0].id}: {off[0].length} tokens, {tokens[off[0].id]} under "
               f"{model_name}'s)" if off else "")
    if record["same"] is False:
        line = (f"trap folder {where} was generated with another tokenizer "
                f"({made or 'unnamed'}'s, by its manifest's fingerprint) than {model_name}'s: "
                "trap lengths are the generating tokenizer's and the cells are keyed by them; "
                f"{len(off)} of {len(traps)} traps re-encode to other lengths under "
                f"{model_name}'s tokenizer{example}, each trap's count under it being the "
                "'tokens' column of scores.jsonl")
    elif off:
        line = (f"{len(off)} of {len(traps)} traps re-encode to another length under "
                f"{model_name}'s tokenizer{example}; they are scored and counted under their "
                "generated length" + (" (every trap does: a folder from another tokenizer?)"
                                      if len(off) == len(traps) else ""))
    else:
        line = None
    if want is None:
        notices.append(f"trap folder {where}: its manifest records no tokenizer fingerprint, "
                       "so only the traps' re-encoded lengths were checked")
    if line:
        logger.warning(line)
        notices.append(line)
    return tokens, record
