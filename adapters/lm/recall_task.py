"""The language model as a free-recall subject: study lists, recall prompts, batched generation.

An instruction-tuned model is shown a word list in one chat turn and asked to recall it, in
any order (free recall) or in the studied order (serial recall, the control), as in the
follow-ups to Ji-An et al. (2024) (Mistry et al. 2025; Bajaj et al. 2025). Its answer is
parsed into recalls by :mod:`icl_cmr.adapters.recall_text` and lands in the same events
dataset as human data, with one subject per (model, decoding setting, seed).

Generation is batched (left padding) with the key-value cache on a plain copy of the bridge's
Hugging Face model that shares its weights (:func:`~icl_cmr.adapters.lm.interventions.plain_model`);
heads can be zero-ablated during generation at their output (the input of each layer's
attention output projection, which is ``blocks.{layer}.attn.hook_z`` flattened). An intact
model whose answers are degenerate on every list, or an instruction-tuned one that recalls
nothing at all, raises :class:`~icl_cmr.adapters.errors.ModelOutputError`: that is a broken
model or library, never a result.
Greedy decoding is deterministic; sampling draws from a torch generator seeded by ``rng``
(results depend on ``rng`` and ``batch_size``, never on the global RNG). torch is imported
inside functions, so importing this module is cheap.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from cmr.checks import as_generator, seed_of
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError

from ..errors import ModelNotAvailableError, ModelOutputError
from ..recall_text import parse_recall, recall_dataset, recall_table, subject_label

__all__ = ["TASKS", "DECODINGS", "INSTRUCTIONS", "study_lists", "word_pool", "recall_prompt", "generate_answers",
           "generate_answers_with_repeats", "zero_ablation_hooks", "recall_events"]

#: recall instructions: free recall (any order) and serial recall (studied order, a control)
INSTRUCTIONS = {
    "free": "Now recall as many words from the list as you can, in any order. "
            "Write only the words, separated by commas.",
    "serial": "Now recall the words in the same order as they were shown. "
              "Write only the words, separated by commas.",
}
TASKS = tuple(INSTRUCTIONS)
#: decoding settings: greedy (deterministic) or sampled at a temperature
DECODINGS = ("greedy", "sample")


#: the pools read so far (at most :data:`_POOL_CACHE_SIZE`), as tuples, by :func:`_pool_key`
_POOLS: dict[tuple, tuple[str, ...]] = {}
_POOL_CACHE_SIZE = 8


def _pool_key(source) -> tuple | None:
    """A bundled name by itself; a file by its resolved path, modification time and size; else None."""
    from ..recall_data import BUNDLED

    if isinstance(source, str) and source in BUNDLED:
        return ("bundled", source)
    if isinstance(source, (str, os.PathLike)):
        try:
            path = Path(source).resolve()
            stat = path.stat()
        except (OSError, RuntimeError, ValueError):
            return None  # read_recall_table says what is wrong with it
        return ("file", str(path), stat.st_mtime_ns, stat.st_size)
    return None


def word_pool(source: str = "psifr:peers_notask") -> list[str]:
    """The distinct studied items of a bundled recall data set or a CSV file, lower-cased and sorted.

    Each source is read once per process (a file again when its modification time or size
    changes); every call returns a new list, so a caller may change it.
    """
    key = _pool_key(source)
    words = _POOLS.get(key) if key is not None else None
    if words is None:
        from ..recall_data import read_recall_table

        table = read_recall_table(source)
        studied = table.loc[table["trial_type"] == "study", "item"].astype(str)
        words = tuple(sorted({item.lower() for item in studied}))
        if key is not None:
            while len(_POOLS) >= _POOL_CACHE_SIZE:
                _POOLS.pop(next(iter(_POOLS)))
            _POOLS[key] = words
    return list(words)


@keyword_only
@renamed_keywords(seed="rng")
def study_lists(pool, *, n_lists: int, list_length: int, rng=0) -> list[list[str]]:
    """``n_lists`` lists of ``list_length`` distinct items drawn from ``pool`` without replacement per list.

    ``rng`` (default 0): an int is the seed of ``numpy.random.default_rng``; a Generator is drawn
    from; None: fresh entropy.
    """
    pool = list(dict.fromkeys(map(str, pool)))
    n_lists, list_length = int(n_lists), int(list_length)
    if n_lists < 1 or list_length < 1:
        raise ParameterError(f"need n_lists >= 1 and list_length >= 1; got {n_lists} and {list_length}")
    if list_length > len(pool):
        raise ParameterError(f"lists of {list_length} items need a pool of at least that many; got {len(pool)}")
    rng = as_generator(rng)
    return [[pool[i] for i in rng.choice(len(pool), size=list_length, replace=False)] for _ in range(n_lists)]


@keyword_only
def recall_prompt(items, *, task: str = "free") -> str:
    """The user message: the list, one item a line, then the recall instruction."""
    if task not in INSTRUCTIONS:
        raise ParameterError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
    return "Study this list of words:\n" + "\n".join(map(str, items)) + "\n\n" + INSTRUCTIONS[task]


def _chat_texts(tokenizer, lists, task, name="model"):
    messages = [[{"role": "user", "content": recall_prompt(items, task=task)}] for items in lists]
    if not getattr(tokenizer, "chat_template", None):
        return [m[0]["content"] + "\n" for m in messages]  # base models: the plain prompt
    from jinja2 import TemplateError, sandbox

    try:  # transformers renders the model's template in jinja2's sandbox; a template that breaks out is refused
        return [tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in messages]
    except TemplateError as exc:
        where = str(getattr(tokenizer, "name_or_path", "") or name)
        source = f" (from {where!r})" if where != name else ""
        what = ("was refused: it reaches for Python objects outside jinja2's sandbox"
                if isinstance(exc, sandbox.SecurityError) else "cannot be rendered")
        raise ModelNotAvailableError(
            f"the chat template of {name!r}{source} {what} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); no prompt was generated") from None


def zero_ablation_hooks(heads):
    """fwd_hooks zeroing the chosen (layer, head) slices of ``hook_z`` at every position."""
    by_layer = {}
    for layer, head in heads:
        by_layer.setdefault(int(layer), []).append(int(head))

    def make(index):
        def hook(z, hook):
            z = z.clone()
            z[:, :, index, :] = 0.0
            return z
        return hook

    return [(f"blocks.{layer}.attn.hook_z", make(sorted(chosen))) for layer, chosen in sorted(by_layer.items())]


#: a generated answer is degenerate when one token repeated back to back fills at least half of it
#: and at least this many tokens ("The-----------"): what a model that ignores its prompt writes
DEGENERATE_RUN = 8
_SEPARATORS = ",;\n"


def _loop_stopper(tokenizer, prompt_length: int, lists, max_intrusion_words=None):
    """A stopping criterion ending each row once its finished items hold a decoding loop.

    The loop is the one scoring drops (:func:`~icl_cmr.adapters.recall_text.find_loop` on the
    items :func:`~icl_cmr.adapters.recall_text.parse_recall` reads in the answer up to its last
    separator), so a stopped row is scored with exactly its loop counted; ``stopped`` records
    the rows it ended. Rows that never loop are not touched.
    """
    import torch
    from transformers import StoppingCriteria

    class StopLoops(StoppingCriteria):
        def __init__(self):
            self.stopped = [False] * len(lists)
            self._seen = [None] * len(lists)  # the finished text last parsed per row: parse it once

        def __call__(self, input_ids, scores, **kwargs):
            texts = tokenizer.batch_decode(input_ids[:, prompt_length:], skip_special_tokens=True)
            for row, text in enumerate(texts):
                finished = _trimmed(text, False)
                if self.stopped[row] or finished == self._seen[row]:
                    continue
                self._seen[row] = finished
                parsed = parse_recall(finished, lists[row], max_intrusion_words=max_intrusion_words)
                self.stopped[row] = parsed.loop_period > 0
            return torch.tensor(self.stopped, dtype=torch.bool, device=input_ids.device)

    return StopLoops()


def degenerate_rows(new_ids, eos_id) -> np.ndarray:
    """Per row of generated token ids (n_row, n_new): whether the answer is degenerate.

    Degenerate: the longest run of one token repeated back to back covers at least half of the
    answer's tokens (up to its end of turn) and at least :data:`DEGENERATE_RUN` tokens. Loops of
    several items ("hat, back, hat, back") are not: scoring counts them (``n_loop``); nor is an empty
    answer (an instruction-tuned model that recalls nothing is caught by :func:`recall_events`).
    """
    ids = np.asarray(new_ids)
    flags = np.zeros(ids.shape[0], dtype=bool)
    for row, tokens in enumerate(ids):
        ends = np.flatnonzero(tokens == eos_id)
        tokens = tokens[: ends[0]] if ends.size else tokens
        if tokens.size == 0:
            continue
        starts = np.flatnonzero(np.r_[True, tokens[1:] != tokens[:-1], True])
        longest = int(np.diff(starts).max())
        flags[row] = longest >= DEGENERATE_RUN and 2 * longest >= tokens.size
    return flags


def _library_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("transformers", "transformer-lens", "torch"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return ", ".join(found)


def _trimmed(text: str, ended: bool) -> str:
    """An answer cut off mid-item (token limit or loop stop) loses its unfinished last segment."""
    if ended:
        return text
    cut = max(text.rfind(c) for c in _SEPARATORS)
    return text[:cut + 1] if cut >= 0 else ""


@renamed_keywords(seed="rng")
def generate_answers(model, lists, *, task: str = "free", decoding: str = "greedy", temperature: float = 0.7,
                     rng=0, batch_size: int = 16, max_new_tokens: int | None = None, heads=(),
                     trim: bool = True, max_intrusion_words: int | None = None, return_cut: bool = False):
    """The model's answer to each study list (generated text only), a list of str.

    Parameters
    ----------
    model : LoadedModel
        From :func:`~icl_cmr.adapters.lm.loading.load_model` (an instruction-tuned model
        with a chat template; a model without one gets the plain prompt).
    lists : sequence of sequences of str
        Study lists.
    task : {"free", "serial"}
    decoding : {"greedy", "sample"}
        ``sample`` draws at ``temperature`` with a torch generator seeded by ``rng``.
    rng : int, numpy.random.Generator or None
        Seed of the sampling (default 0): an int is used as is; a Generator draws one
        (``int(rng.integers(2**63))``); None draws one from fresh entropy.
    batch_size : int
        Lists generated together (left-padded, one key-value cache per batch).
    max_new_tokens : int, optional
        Default ``4 * longest list + 16``. A row also stops at the end of its turn or once
        its items hold a decoding loop: a block of 1 to 4 items repeated 3 times in a row, or a
        second pass over items already recalled in that order
        (:func:`~icl_cmr.adapters.recall_text.find_loop`; scored as ``n_loop``).
    heads : sequence of (layer, head)
        Heads zero-ablated at their output during the whole generation.
    trim : bool
        Cut an answer that did not end its turn after its last separator (comma, semicolon,
        newline), so an item cut off mid-word is not scored as an intrusion.
    max_intrusion_words : int, optional
        As :func:`~icl_cmr.adapters.recall_text.parse_recall`, for the loop stop.
    return_cut : bool
        Also return, per answer, the text ``trim`` cut off its end (``""`` where nothing was
        cut), as ``(answers, cut)``: each answer + its cut is the whole generated text.

    Raises
    ------
    ModelOutputError
        The intact model (no ``heads``) gave a degenerate answer (:func:`degenerate_rows`) to
        every list.
    """
    import torch

    from .interventions import plain_model, zeroed_heads

    if decoding not in DECODINGS:
        raise ParameterError(f"decoding must be one of {', '.join(DECODINGS)}; got {decoding!r}")
    if decoding == "sample" and not float(temperature) > 0:
        raise ParameterError(f"temperature must be > 0 for sampling; got {temperature!r}")
    if int(batch_size) < 1:
        raise ParameterError(f"batch_size must be >= 1; got {batch_size!r}")
    seed = seed_of(rng)
    lists = [list(map(str, items)) for items in lists]
    bridge, tokenizer = model.bridge, model.tokenizer
    plain = plain_model(bridge)
    if plain is not None:  # the plain model keeps its key-value cache under every transformers version
        hf, ablated, cache = plain, zeroed_heads(bridge, plain, heads), True
    else:  # through the bridge: its attention components keep no cache under transformers >= 5.24
        hf, ablated, cache = bridge.original_model, bridge.hooks(fwd_hooks=zero_ablation_hooks(heads)), False
    texts = _chat_texts(tokenizer, lists, task, model.name)
    limit = int(max_new_tokens) if max_new_tokens is not None else 4 * max(map(len, lists)) + 16
    eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else hf.config.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_id
    device = next(hf.parameters()).device
    options = dict(max_new_tokens=limit, pad_token_id=pad_id, eos_token_id=eos_id, use_cache=cache)
    options.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0) if decoding == "sample" \
        else options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    answers, cut, degenerate, sample = [], [], 0, ""
    with torch.random.fork_rng(devices=[]), torch.no_grad(), ablated:
        torch.manual_seed(seed)
        for start in range(0, len(encoded), int(batch_size)):
            rows = encoded[start:start + int(batch_size)]
            length = max(map(len, rows))
            # left padding: every row continues at the same last position
            ids = torch.tensor([[pad_id] * (length - len(r)) + r for r in rows], dtype=torch.long, device=device)
            mask = torch.tensor([[0] * (length - len(r)) + [1] * len(r) for r in rows], dtype=torch.long, device=device)
            stopper = _loop_stopper(tokenizer, length, lists[start:start + int(batch_size)], max_intrusion_words)
            out = hf.generate(input_ids=ids, attention_mask=mask, **options, stopping_criteria=[stopper])
            new = out[:, length:]
            degenerate += int(degenerate_rows(new.cpu().numpy(), eos_id).sum())
            # a row stopped at a loop is padded (often with the end-of-turn token): it did not end its turn
            ended = [bool(end) and not looped for end, looped in zip((new == eos_id).any(dim=1).tolist(),
                                                                     stopper.stopped)]
            decoded = tokenizer.batch_decode(new, skip_special_tokens=True)
            sample = sample if answers else decoded[0]
            kept = [_trimmed(text, end or not trim) for text, end in zip(decoded, ended)]
            answers.extend(kept)
            cut.extend(text[len(answer):] for text, answer in zip(decoded, kept))
    if not heads and degenerate == len(lists):
        raise ModelOutputError(
            f"{model.name} gave a degenerate answer to every one of {len(lists)} list(s) (e.g. "
            f"{sample[:40]!r}): an intact model that ignores its prompt points to a damaged model file or a "
            f"library version this tool was not tested with ({_library_versions()}; docs/install.md lists the "
            "tested ones)")
    return (answers, cut) if return_cut else answers


def generate_answers_with_repeats(model, lists, *, batch_size: int = 16,
                                  max_new_tokens: int | None = None) -> list[str]:
    """Greedy free-recall answers to study lists that show some words twice, a list of str.

    The prompt, chat template, left padding, greedy decoding and token limit of
    :func:`generate_answers`, without its stop at a decoding loop (which parses the shown words
    as distinct studied items): a row runs to the end of its turn or to the token limit, its
    loops are counted when the answer is scored, and an answer cut off at the limit loses its
    unfinished last item. The strength conditions of
    :func:`icl_cmr.analyses.memory.battery.run_battery` are generated this way.
    """
    import torch

    from .interventions import plain_model

    tokenizer = model.tokenizer
    plain = plain_model(model.bridge)
    hf = plain if plain is not None else model.bridge.original_model
    prompts = [recall_prompt(order, task="free") for order in lists]
    if getattr(tokenizer, "chat_template", None):
        texts = [tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                               add_generation_prompt=True) for text in prompts]
    else:
        texts = [text + "\n" for text in prompts]
    limit = int(max_new_tokens) if max_new_tokens is not None else 4 * max(map(len, lists)) + 16
    eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else hf.config.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_id
    device = next(hf.parameters()).device
    encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    answers = []
    with torch.no_grad():
        for start in range(0, len(encoded), int(batch_size)):
            rows = encoded[start:start + int(batch_size)]
            length = max(map(len, rows))
            ids = torch.tensor([[pad_id] * (length - len(r)) + r for r in rows], dtype=torch.long, device=device)
            mask = torch.tensor([[0] * (length - len(r)) + [1] * len(r) for r in rows], dtype=torch.long,
                                device=device)
            new = hf.generate(input_ids=ids, attention_mask=mask, max_new_tokens=limit, do_sample=False,
                              temperature=None, top_p=None, top_k=None, pad_token_id=pad_id, eos_token_id=eos_id,
                              use_cache=plain is not None)[:, length:]
            for text, ended in zip(tokenizer.batch_decode(new, skip_special_tokens=True),
                                   (new == eos_id).any(dim=1).tolist()):
                cut = max(text.rfind(c) for c in ",;\n")
                answers.append(text if ended else text[:cut + 1] if cut >= 0 else "")
    return answers


def recall_events(model, lists, *, task: str = "free", decoding: str = "greedy", seeds=(0,), temperature: float = 0.7,
                  batch_size: int = 16, max_new_tokens: int | None = None, heads=(), label: str | None = None,
                  max_intrusion_words: int | None = None):
    """Events dataset of the model's recall of ``lists``, one subject per (model, decoding, seed).

    Greedy decoding does not depend on the seed, so it runs once (subject seed 0). Returns
    ``(events, table)``: the events dataset (:func:`~icl_cmr.adapters.recall_text.recall_dataset`:
    along ``trial`` the per-list counts of :data:`~icl_cmr.adapters.recall_text.COUNT_NAMES`,
    ``prompt`` (the exact text the model was given, its chat template applied), ``answer`` (the
    generated text that was parsed), ``answer_cut`` (what ``trim`` cut off its end: an item cut
    off mid-word) and ``answer_segments`` (every segment with its category:
    recall, repeat, intrusion, filler, loop); along ``output_position`` each recall's segment
    ``recall_raw`` and category ``recall_category``) and the psifr long table it was made from
    (:func:`~icl_cmr.adapters.recall_text.recall_table`, with the same per-list columns).
    ``max_intrusion_words`` is that of :func:`~icl_cmr.adapters.recall_text.parse_recall` (the
    pool's longest item, in words).

    An intact instruction-tuned model (one with a chat template, no ``heads`` ablated) that
    recalls no studied item on any list raises :class:`~icl_cmr.adapters.errors.ModelOutputError`
    (as do degenerate answers, :func:`generate_answers`); a base or toy model without a chat
    template may recall nothing.
    """
    import pandas as pd

    seeds = [0] if decoding == "greedy" else [int(s) for s in np.atleast_1d(seeds)]
    name = label or model.name
    prompts = _chat_texts(model.tokenizer, [list(map(str, items)) for items in lists], task, model.name)
    tables = []
    for seed in seeds:
        answers, cut = generate_answers(model, lists, task=task, decoding=decoding, temperature=temperature,
                                        rng=seed, batch_size=batch_size, max_new_tokens=max_new_tokens, heads=heads,
                                        max_intrusion_words=max_intrusion_words, return_cut=True)
        table = recall_table(lists, answers, subject_label(name, decoding if decoding == "greedy"
                                                            else f"sample-T{temperature:g}", seed),
                             max_intrusion_words=max_intrusion_words, prompts=prompts, cuts=cut)
        if not heads and getattr(model.tokenizer, "chat_template", None) and table["n_correct"].sum() == 0:
            raise ModelOutputError(
                f"{name}, an instruction-tuned model, recalled no studied word on any of {len(lists)} list(s) (first "
                f"answer: {answers[0][:60]!r}): that points to a damaged model file or a library version this tool "
                f"was not tested with ({_library_versions()}; docs/install.md lists the tested ones), not a result")
        tables.append(table)
    table = pd.concat(tables, ignore_index=True)
    events = recall_dataset(table, source=f"{name} {task} recall ({decoding})")
    events.attrs.update(task=task, decoding=decoding, temperature=float(temperature) if decoding == "sample" else 0.0,
                        instruction=INSTRUCTIONS[task], ablated_heads=",".join(f"L{l}.H{h}" for l, h in heads))
    return events, table
