"""Train a small Llama-style transformer offline and watch induction / CMR-like heads appear.

The toy run (``icl-cmr train-toy``) trains a 2-layer model on the Wikipedia sample inside the
gensim wheel (:mod:`adapters.text_corpus`), seeded, on CPU in minutes, and saves checkpoints
(Hugging Face directories, written atomically) at roughly log-spaced steps. What makes induction
heads appear within a few thousand steps: a small byte-level BPE vocabulary trained on the
corpus (fast softmax), and most training rows (90%) being lists of random words drawn from the
64 most frequent whole-word tokens (the kind of token the head prompts use) in which a random
segment of random length is repeated at a random place, so that the repeat is the only thing
to learn in such a row and only an induction circuit predicts it; the rest is natural text.
Random lengths and places matter: with a fixed layout the model learns to copy from a fixed
distance back instead of by content. Segments of uniform random tokens from the whole 1024
vocabulary inside text (the first recipe) gave no induction within 2,000 steps.

The dynamics scan (:func:`scan_checkpoints`) then runs the same pipeline as for a released LLM
on every checkpoint: head lag profiles (:func:`adapters.transformer_lens.extract_heads`, the same
fixed word list at every step) and CMR fits (:func:`cmr.profile_fit.fit_profiles`), giving
induction score, CMR distance, fitted parameters and inverse temperature against training step.
See docs/training-dynamics.md.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from cmr.errors import DataSourceError, ParameterError
from cmr.io import atomic_write

__all__ = ["ToySettings", "QUICK", "checkpoint_steps", "build_tokenizer", "make_batch", "train_toy",
           "list_checkpoints", "prompt_words", "segment_tokens"]

SETTINGS_FILE = "train_toy.json"
LOG_FILE = "training_log.json"
TOKENIZER_DIR = "tokenizer"
CHECKPOINT_DIR = "checkpoints"


@dataclass(frozen=True)
class ToySettings:
    """Everything that defines a toy run (stored in ``DIR/train_toy.json``)."""

    steps: int = 4000
    seed: int = 0
    n_layers: int = 2
    n_heads: int = 2
    d_model: int = 64
    d_mlp: int = 128
    rope_theta: float = 10000.0
    vocab_size: int = 1024
    seq_len: int = 48
    batch_size: int = 64
    learning_rate: float = 1e-3
    warmup: int = 50
    repeat_fraction: float = 0.9
    repeat_words: int = 64
    n_checkpoints: int = 12
    text: str = "wikipedia"

    def validate(self) -> "ToySettings":
        for name in ("steps", "n_layers", "n_heads", "d_model", "d_mlp", "batch_size", "n_checkpoints"):
            if int(getattr(self, name)) < 1:
                raise ParameterError(f"{name} must be >= 1; got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ParameterError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads})")
        if self.seq_len < 16 or self.seq_len % 2:
            raise ParameterError(f"seq_len must be an even number >= 16; got {self.seq_len}")
        if self.vocab_size < 300:
            raise ParameterError(f"vocab_size must be >= 300 (256 bytes + merges); got {self.vocab_size}")
        if int(self.repeat_words) < 0:
            raise ParameterError(f"repeat_words must be >= 0 (0: any token); got {self.repeat_words!r}")
        if not 0.0 <= self.repeat_fraction <= 1.0:
            raise ParameterError(f"repeat_fraction must be in [0, 1]; got {self.repeat_fraction}")
        return self


#: a shorter run for demos: the default run stopped at 2500 steps
QUICK = ToySettings(steps=2500, n_checkpoints=11)


def checkpoint_steps(steps: int, n_checkpoints: int) -> list[int]:
    """Step 0, then roughly log-spaced steps up to ``steps`` (at most ``n_checkpoints`` in all)."""
    if n_checkpoints < 2:
        return [int(steps)]
    inner = np.geomspace(max(1.0, steps / 2 ** (n_checkpoints - 2)), steps, n_checkpoints - 1)
    return sorted({0, *(int(round(s)) for s in inner), int(steps)})


def build_tokenizer(documents, vocab_size: int):
    """A byte-level BPE tokenizer trained on ``documents`` (``<unk>`` = 0, ``<s>`` = BOS = 1)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=int(vocab_size), special_tokens=["<unk>", "<s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(documents, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", unk_token="<unk>",
                                        add_bos_token=True)
    tokenizer.init_kwargs.update(name_or_path="icl-cmr-toy", add_bos_token=True)
    return tokenizer


def make_batch(stream: np.ndarray, rng: np.random.Generator, batch_size: int, seq_len: int,
               repeat_fraction: float, vocab_size: int, bos_id: int,
               segment_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A training batch: BOS + natural text, some rows with a random segment repeated inside.

    In a share ``repeat_fraction`` of rows a segment of ``L`` uniform random tokens (``L`` drawn
    from seq_len/8..seq_len/2) appears twice in a row at a random offset within the text, so the
    second copy is predictable only by content (an induction head), not by a fixed distance.
    Segment tokens are drawn from ``segment_ids`` (e.g. the most frequent whole-word tokens, the
    kind of token the head prompts use) when given, and then the rest of such a row is random
    words too (not text), so that the repeat is the only thing to learn in it; without
    ``segment_ids`` segments are drawn from all ids 2..vocab_size-1 inside the text.

    Returns
    -------
    batch : int64 (batch, seq_len + 1)
    spans : int64 (batch, 2), (start of the first copy, L) per row; L = 0 for plain text
    """
    batch = np.empty((batch_size, seq_len + 1), dtype=np.int64)
    spans = np.zeros((batch_size, 2), dtype=np.int64)
    batch[:, 0] = bos_id
    for row in range(batch_size):
        start = int(rng.integers(0, stream.size - seq_len))
        batch[row, 1:] = stream[start:start + seq_len]
        if rng.random() < repeat_fraction:
            length = int(rng.integers(seq_len // 8, seq_len // 2 + 1))
            offset = 1 + int(rng.integers(0, seq_len - 2 * length + 1))
            if segment_ids is None:
                segment = rng.integers(2, vocab_size, size=length)
            else:  # the whole row becomes random words: nothing but the repeat is predictable
                batch[row, 1:] = segment_ids[rng.integers(0, segment_ids.size, size=seq_len)]
                segment = segment_ids[rng.integers(0, segment_ids.size, size=length)]
            batch[row, offset:offset + length] = segment
            batch[row, offset + length:offset + 2 * length] = segment
            spans[row] = offset, length
    return batch, spans


def segment_tokens(tokenizer, stream: np.ndarray, n_words: int) -> np.ndarray | None:
    """Ids of the ``n_words`` most frequent whole-word tokens of ``stream`` (None for 0: any token).

    Uses the head prompts' word rule (:func:`adapters.prompts.select_words`), so the words of the
    scan's prompts are among them; a corpus with fewer usable words gives all it has.
    """
    from adapters.prompts import select_words
    from cmr.errors import PromptError

    if not n_words:
        return None
    prior = np.log(np.bincount(stream, minlength=len(tokenizer)).astype(np.float64) + 0.5)
    n = int(n_words)
    while True:
        try:
            return select_words(tokenizer, prior, n)[0]
        except PromptError:
            if n <= 2:
                raise
            n = max(2, n // 2)


def _atomic_dir(final: Path, write) -> Path:
    """Write a directory by ``write(tmp_dir)`` then rename it into place (never half-written)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        write(tmp)
        for path in tmp.iterdir():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _write_json(path: Path, data) -> None:
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))


def _evaluate(model, eval_text, eval_repeat, eval_spans):
    """Held-out losses: natural text, and the first and second copy of repeated segments."""
    import torch

    with torch.no_grad():
        text_loss = _loss(model, eval_text).mean().item()
        losses = _loss(model, eval_repeat).numpy()  # loss[:, i] is the loss of token i + 1
        first, second = [], []
        for row, (offset, length) in enumerate(eval_spans):
            first.append(losses[row, offset:offset + length - 1].mean())  # tokens offset+1 .. offset+L-1
            second.append(losses[row, offset + length:offset + 2 * length - 1].mean())
        return dict(eval_loss_text=text_loss, eval_loss_repeat_first=float(np.mean(first)),
                    eval_loss_repeat_second=float(np.mean(second)))


def _loss(model, batch):
    import torch

    logits = model(input_ids=batch[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")


def train_toy(out_dir, settings: ToySettings = ToySettings(), *, progress: bool = True, log=print) -> dict:
    """Train the toy model, saving checkpoints in ``out_dir/checkpoints/step_NNNNNN`` atomically.

    Reproducible from ``settings.seed`` (the same thread count gives bitwise-equal weights).
    Returns the training log: settings, checkpoint steps, per-step training loss and held-out
    losses at each checkpoint. Also writes ``train_toy.json``, ``training_log.json`` and the
    tokenizer (``tokenizer/``) in ``out_dir``.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import LlamaConfig, LlamaForCausalLM

    from adapters.text_corpus import read_documents, tokenize_documents

    settings = settings.validate()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    documents = read_documents(settings.text)
    tokenizer = build_tokenizer(documents, settings.vocab_size)
    _atomic_dir(out / TOKENIZER_DIR, tokenizer.save_pretrained)
    bos = int(tokenizer.bos_token_id)
    pieces = tokenize_documents(documents, tokenizer)
    stream = np.concatenate([np.r_[bos, ids] for ids in pieces]).astype(np.int64)
    n_eval = max(settings.seq_len * 32, stream.size // 20)
    train_stream, eval_stream = stream[:-n_eval], stream[-n_eval:]  # the last documents are held out
    if train_stream.size < 4 * settings.seq_len:
        raise DataSourceError(f"text source {settings.text!r} has only {stream.size} tokens; too few to train on")
    vocab = len(tokenizer)
    segment_ids = segment_tokens(tokenizer, stream, settings.repeat_words)
    rng = np.random.default_rng(settings.seed)
    eval_rng = np.random.default_rng([settings.seed, 1])
    eval_text = torch.as_tensor(make_batch(eval_stream, eval_rng, 32, settings.seq_len, 0.0, vocab, bos)[0])
    eval_repeat, eval_spans = make_batch(eval_stream, eval_rng, 32, settings.seq_len, 1.0, vocab, bos, segment_ids)
    eval_repeat = torch.as_tensor(eval_repeat)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=settings.d_model, intermediate_size=settings.d_mlp,
        num_hidden_layers=settings.n_layers, num_attention_heads=settings.n_heads,
        num_key_value_heads=settings.n_heads, max_position_embeddings=max(256, settings.seq_len + 1),
        bos_token_id=bos, eos_token_id=bos, pad_token_id=0, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=float(settings.rope_theta)),
    )
    with torch.random.fork_rng(devices=[]):  # seeded without touching the caller's global RNG
        torch.manual_seed(settings.seed)
        model = LlamaForCausalLM(config)
    model.config._attn_implementation = "sdpa"
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, betas=(0.9, 0.95), weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / settings.warmup))
    saves = checkpoint_steps(settings.steps, settings.n_checkpoints)
    record = dict(settings=asdict(settings), checkpoint_steps=saves, train_loss=[], checkpoints=[],
                  n_parameters=int(sum(p.numel() for p in model.parameters())), n_train_tokens=int(train_stream.size))
    _write_json(out / SETTINGS_FILE, dict(settings=asdict(settings), checkpoint_steps=saves))

    def save(step):
        model.eval()
        evaluation = _evaluate(model, eval_text, eval_repeat, eval_spans)
        model.train()

        def write(tmp):
            model.config._attn_implementation = "eager"  # what attention extraction reads
            model.save_pretrained(tmp)
            model.config._attn_implementation = "sdpa"
            tokenizer.save_pretrained(tmp)

        _atomic_dir(out / CHECKPOINT_DIR / f"step_{step:06d}", write)
        record["checkpoints"].append(dict(step=step, **evaluation))
        record["seconds"] = round(time.perf_counter() - started, 2)
        _write_json(out / LOG_FILE, record)
        log(f"step {step:5d}: text loss {evaluation['eval_loss_text']:.3f}, repeated segment "
            f"{evaluation['eval_loss_repeat_first']:.3f} -> {evaluation['eval_loss_repeat_second']:.3f}")

    model.train()
    if 0 in saves:
        save(0)
    bar = tqdm(range(1, settings.steps + 1), desc="training toy model", unit="step", disable=not progress)
    for step in bar:
        batch = torch.as_tensor(make_batch(train_stream, rng, settings.batch_size, settings.seq_len,
                                           settings.repeat_fraction, vocab, bos, segment_ids)[0])
        loss = _loss(model, batch).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        record["train_loss"].append(round(float(loss.item()), 6))
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if step in saves:
            save(step)
    bar.close()
    return record


def list_checkpoints(run_dir) -> list[tuple[int, Path]]:
    """(step, directory) of every finished checkpoint of a toy run, by step."""
    root = Path(run_dir) / CHECKPOINT_DIR
    found = sorted((int(p.name.split("_")[1]), p) for p in root.glob("step_*") if p.is_dir())
    if not found:
        raise DataSourceError(f"no checkpoints under {str(root)!r}; run `icl-cmr train-toy -o {run_dir}` first")
    return found


def prompt_words(run_dir, n_words: int) -> list[str]:
    """The ``n_words`` most frequent whole-word tokens (``' word'``) of the toy corpus.

    The same list is used at every checkpoint, so profiles are comparable across steps.
    """
    from transformers import AutoTokenizer

    from adapters.prompts import select_words
    from adapters.text_corpus import read_documents, tokenize_documents

    tokenizer = AutoTokenizer.from_pretrained(str(Path(run_dir) / TOKENIZER_DIR), local_files_only=True)
    settings = json.loads((Path(run_dir) / SETTINGS_FILE).read_text())["settings"]
    counts = np.bincount(np.concatenate(tokenize_documents(read_documents(settings["text"]), tokenizer)),
                         minlength=len(tokenizer)).astype(np.float64)
    _, words = select_words(tokenizer, np.log(counts + 0.5), int(n_words))  # corpus frequency as the prior
    return list(words)
