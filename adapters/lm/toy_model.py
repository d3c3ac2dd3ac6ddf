"""A small Llama-style transformer trained offline, seeded, on CPU: the toy of the dynamics study.

The toy run (``icl-cmr train-toy``) trains a 2-layer model on the Wikipedia sample inside the
gensim wheel (:mod:`icl_cmr.adapters.text_corpus`) and saves checkpoints (Hugging Face
directories, written atomically) at log-spaced, then evenly spaced steps.

The training data (``recipe="copies"``) is natural text in which short phrases repeat: in every
row, spans of 2-8 tokens are copied from earlier in the same row to places a few tokens apart,
over and over, so a share of the tokens can be predicted only by finding the earlier occurrence
of the current token and reading what followed it. Natural text makes a previous-token head
worth having in layer 0 (bigram statistics), and short copies at every distance rule out the
other ways to copy (a head at a fixed distance back works only for copies longer than that
distance), so the model forms the textbook circuit: a layer-0 previous-token head and layer-1
induction heads, with an abrupt drop of the loss on copied tokens (about step 1,000 at seed 0).
Rows with one long repeated segment instead let the model copy through fixed-offset heads
without an induction head (docs/training-dynamics.md).

The ``"position-blind"`` recipe trains on the same data a GPT-2-style model with fixed absolute
positions whose layer-0 attention compares tokens by similarity and cannot see position
(:func:`position_blind_model`): no previous-token head can form, so layer 1 must find the
earlier copy through the layer-0 duplicate-token heads' output. The recipe leaves CMR's circuit
(that output in the layer-1 query: Q-composition) open; trained (seeds 0-3) the layer-1 induction
heads are Q-composed through the duplicate-token heads, and their keys read only the key's own
position, partly relayed by those heads' attention to the token itself (docs/circuit.md).

Every torch call of the toy lives here; the dynamics scan (:mod:`icl_cmr.analyses.heads.dynamics`)
reads the checkpoints through the same pipeline as a released model.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from cmr.deprecation import keyword_only
from cmr.errors import DataSourceError, ParameterError
from cmr.io import atomic_directory, atomic_write

__all__ = ["ToySettings", "QUICK", "RECIPES", "recipe_settings", "checkpoint_steps", "build_tokenizer", "text_batch",
           "make_copy_batch", "sinusoid_positions", "POSITION_NORM", "SIMILARITY_INIT_STD", "position_blind_model",
           "train_toy", "list_checkpoints", "prompt_words"]

SETTINGS_FILE = "train_toy.json"
LOG_FILE = "training_log.json"
TOKENIZER_DIR = "tokenizer"
CHECKPOINT_DIR = "checkpoints"
#: training-data recipes (see the module docstring)
RECIPES = ("copies", "position-blind")


@dataclass(frozen=True)
class ToySettings:
    """Everything that defines a toy run (stored in ``DIR/train_toy.json``)."""

    steps: int = 3000
    seed: int = 0
    recipe: str = "copies"
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
    repeat_fraction: float = 1.0
    copy_min: int = 2
    copy_max: int = 8
    copy_gap: int = 5
    n_checkpoints: int = 24
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
        if not 0.0 <= self.repeat_fraction <= 1.0:
            raise ParameterError(f"repeat_fraction must be in [0, 1]; got {self.repeat_fraction}")
        if self.recipe not in RECIPES:
            raise ParameterError(f"recipe must be one of {', '.join(RECIPES)}; got {self.recipe!r}")
        if not 2 <= int(self.copy_min) <= int(self.copy_max) <= self.seq_len // 2:
            raise ParameterError(f"copy lengths must satisfy 2 <= copy_min <= copy_max <= seq_len / 2 = "
                                 f"{self.seq_len // 2}; got copy_min={self.copy_min!r}, copy_max={self.copy_max!r}")
        if int(self.copy_gap) < 1:
            raise ParameterError(f"copy_gap must be >= 1; got {self.copy_gap!r}")
        return self


#: a shorter run for demos: the default run stopped at 1500 steps (past the phase change)
QUICK = ToySettings(steps=1500, n_checkpoints=16)


def recipe_settings(recipe: str = "copies", *, quick: bool = False) -> ToySettings:
    """The settings of a recipe's run (``quick``: the same run stopped at half its steps)."""
    settings = QUICK if quick else ToySettings()
    return replace(settings, recipe=recipe).validate()


def checkpoint_steps(steps: int, n_checkpoints: int) -> list[int]:
    """Step 0, log-spaced steps, then evenly spaced steps up to ``steps`` (<= ``n_checkpoints``).

    About two thirds of the checkpoints are evenly spaced (a phase change in the middle of the
    run is sampled densely), the rest log-spaced below the first of them (the fast early
    changes); duplicates from rounding are dropped.
    """
    if n_checkpoints < 2:
        return [int(steps)]
    n_linear = max(1, 2 * (n_checkpoints - 1) // 3)
    n_log = n_checkpoints - 1 - n_linear
    linear = steps * np.arange(1, n_linear + 1) / n_linear
    first = steps / n_linear
    log = np.geomspace(max(1.0, first / 2 ** n_log), first, n_log + 1)[:-1] if n_log else []
    return sorted({0, *(int(round(s)) for s in log), *(int(round(s)) for s in linear)})


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


def text_batch(stream: np.ndarray, rng: np.random.Generator, batch_size: int, seq_len: int,
               bos_id: int) -> np.ndarray:
    """BOS + a random window of natural text per row: int64 (batch, seq_len + 1)."""
    batch = np.empty((batch_size, seq_len + 1), dtype=np.int64)
    batch[:, 0] = bos_id
    for row in range(batch_size):
        start = int(rng.integers(0, stream.size - seq_len))
        batch[row, 1:] = stream[start:start + seq_len]
    return batch


@keyword_only
def make_copy_batch(stream: np.ndarray, rng: np.random.Generator, *, batch_size: int, seq_len: int,
                    repeat_fraction: float, bos_id: int, copy_length=(2, 8),
                    copy_gap: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A training batch of natural text in which short phrases repeat (the ``"copies"`` recipe).

    Every row is BOS + a window of the token stream. In a share ``repeat_fraction`` of rows,
    walking left to right, a span of ``L`` tokens (``L`` uniform in ``copy_length``) is copied
    from a random earlier place of the same row, then 1..``copy_gap`` tokens of the text are
    kept, and so on to the end of the row: about half of such a row is copies, at every distance.

    Returns
    -------
    batch : int64 (batch, seq_len + 1)
    copied : bool (batch, seq_len + 1), tokens predictable by induction: every token of a copy
        after its first (its predecessor occurred earlier, followed by it)
    source : bool (batch, seq_len + 1), the same tokens at their earlier occurrence (excluding
        tokens that are themselves copied), for the first-occurrence loss
    """
    low, high = (int(v) for v in copy_length)
    if not 2 <= low <= high <= seq_len // 2 or int(copy_gap) < 1:
        raise ParameterError(f"copy_length must be (min, max) with 2 <= min <= max <= seq_len / 2 = {seq_len // 2} "
                             f"and copy_gap >= 1; got copy_length={tuple(copy_length)!r}, copy_gap={copy_gap!r}")
    if stream.size <= seq_len:
        raise DataSourceError(f"the token stream has {stream.size} tokens; need more than seq_len = {seq_len}")
    batch = np.empty((batch_size, seq_len + 1), dtype=np.int64)
    copied = np.zeros(batch.shape, dtype=bool)
    source = np.zeros(batch.shape, dtype=bool)
    batch[:, 0] = bos_id
    for row in range(batch_size):
        start = int(rng.integers(0, stream.size - seq_len))
        batch[row, 1:] = stream[start:start + seq_len]
        if rng.random() >= repeat_fraction:
            continue
        pos = 1 + int(rng.integers(0, copy_gap))
        while pos < seq_len:
            length = int(rng.integers(low, high + 1))
            if pos - length >= 1 and pos + length <= seq_len + 1:
                src = int(rng.integers(1, pos - length + 1))  # the whole source lies before pos
                batch[row, pos:pos + length] = batch[row, src:src + length]
                copied[row, pos + 1:pos + length] = True
                source[row, src + 1:src + length] = True
                pos += length
            pos += int(rng.integers(1, copy_gap + 1))
    source &= ~copied
    return batch, copied, source


def sinusoid_positions(n_positions: int, d_model: int) -> np.ndarray:
    """Fixed absolute position vectors in the upper half of the residual stream, float64 (position, d_model).

    Frequencies ``100 ** (-f / F)`` rad per position (``F = d_model // 8``, periods 6 to about
    350 positions), each written as the block ``(sin, cos, -sin, -cos)``: every vector sums to
    zero and has unit norm, so a LayerNorm's mean and variance do not depend on the position,
    and moving one position on is a fixed linear map (a rotation in every block).
    """
    half = d_model // 2
    n_freq = half // 4
    if n_freq < 1:
        raise ParameterError(f"the position-blind recipe needs d_model >= 8; got {d_model}")
    angle = np.arange(n_positions)[:, None] * 100.0 ** (-np.arange(n_freq) / n_freq)[None, :]
    block = np.stack([np.sin(angle), np.cos(angle), -np.sin(angle), -np.cos(angle)], axis=-1)
    table = np.zeros((n_positions, d_model))
    table[:, half:half + 4 * n_freq] = block.reshape(n_positions, -1) / np.sqrt(2 * n_freq)
    return table


#: norm of the fixed position vectors of the ``"position-blind"`` recipe (token embeddings start near 0.1)
POSITION_NORM = 0.2
#: standard deviation of the layer-0 query (= key) weights of the ``"position-blind"`` recipe at initialisation
SIMILARITY_INIT_STD = 0.3


def position_blind_model(settings: ToySettings, vocab: int, bos: int):
    """The GPT-2-style model of the ``"position-blind"`` recipe, seeded, with its constraints in place.

    * Token embeddings live in the lower half of the residual stream, fixed absolute positions
      (:func:`sinusoid_positions` times :data:`POSITION_NORM`, not trained) in the upper half.
    * Layer-0 attention is position-blind: its queries and keys read only the lower half, so it
      can see what a token is but not where: no layer-0 head can be a previous-token head, and no
      K-composition induction circuit can form. Its values read everything, so a layer-0 head
      can carry the position of the token it attends to.
    * Layer-0 attention compares tokens by similarity: its keys share the weights (and biases) of
      its queries (``W_K = W_Q``), drawn with standard deviation :data:`SIMILARITY_INIT_STD`, so
      from the start a token attends most to copies of itself (a duplicate-token head, CMR's
      item-to-context head: query ``f_k``, keys ``f_j``). What layer 1 does with it (Q-composition:
      reading the earlier copy's position in its query) is left to training.

    Gradients of the constrained entries are masked (zero) or summed (tied), and AdamW's decay
    keeps a zero at zero and tied entries equal, so every checkpoint is an ordinary
    ``GPT2LMHeadModel`` in which those entries are exactly zero or equal.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=vocab, n_positions=max(256, settings.seq_len + 1), n_embd=settings.d_model,
        n_layer=settings.n_layers, n_head=settings.n_heads, n_inner=settings.d_mlp, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=bos, eos_token_id=bos, pad_token_id=0,
        tie_word_embeddings=False,
    )
    d_model, half = settings.d_model, settings.d_model // 2
    with torch.random.fork_rng(devices=[]):  # seeded without touching the caller's global RNG
        torch.manual_seed(settings.seed)
        model = GPT2LMHeadModel(config)
        c_attn = model.transformer.h[0].attn.c_attn  # Conv1D (d_model, 3 d_model): x @ W, columns q | k | v
        with torch.no_grad():
            c_attn.weight[:, :d_model].normal_(0.0, SIMILARITY_INIT_STD)
    with torch.no_grad():
        positions = sinusoid_positions(config.n_positions, d_model) * POSITION_NORM
        model.transformer.wpe.weight.copy_(torch.as_tensor(positions, dtype=torch.float32))
        c_attn.weight[half:, :d_model] = 0.0
        c_attn.weight[:, d_model:2 * d_model] = c_attn.weight[:, :d_model]
        c_attn.bias[d_model:2 * d_model] = c_attn.bias[:d_model]
        model.transformer.wte.weight[:, half:] = 0.0
    model.transformer.wpe.weight.requires_grad_(False)

    def tie(grad):
        shared = grad[..., :d_model] + grad[..., d_model:2 * d_model]
        return torch.cat([shared, shared, grad[..., 2 * d_model:]], dim=-1)

    def blind(grad):
        grad = tie(grad).clone()
        grad[half:, :2 * d_model] = 0.0
        return grad

    def token_half(grad):
        grad = grad.clone()
        grad[:, half:] = 0.0
        return grad

    c_attn.weight.register_hook(blind)
    c_attn.bias.register_hook(tie)
    model.transformer.wte.weight.register_hook(token_half)
    return model


def _write_json(path: Path, data) -> None:
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))


def _evaluate(model, eval_text, eval_repeat, copied, source):
    """Held-out losses: natural text, and repeated tokens at their first and second occurrence.

    ``copied`` / ``source`` are token masks of ``eval_repeat`` (see :func:`make_copy_batch`).
    """
    import torch

    with torch.no_grad():
        text_loss = _loss(model, eval_text).mean().item()
        losses = _loss(model, eval_repeat).numpy()  # loss[:, i] is the loss of token i + 1
        return dict(eval_loss_text=text_loss, eval_loss_repeat_first=float(losses[source[:, 1:]].mean()),
                    eval_loss_repeat_second=float(losses[copied[:, 1:]].mean()))


def _loss(model, batch):
    import torch

    logits = model(input_ids=batch[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")


@keyword_only
def train_toy(out_dir, *, settings: ToySettings = ToySettings(), progress: bool = True, log=print) -> dict:
    """Train the toy model, saving checkpoints in ``out_dir/checkpoints/step_NNNNNN`` atomically.

    Reproducible from ``settings.seed`` (the same thread count gives bitwise-equal weights).
    Returns the training log: settings, checkpoint steps, per-step training loss and held-out
    losses at each checkpoint. Also writes ``train_toy.json``, ``training_log.json`` and the
    tokenizer (``tokenizer/``) in ``out_dir``.
    """
    import torch
    from safetensors import SafetensorError
    from tqdm.auto import tqdm
    from transformers import LlamaConfig, LlamaForCausalLM

    from cmr.errors import OutputError

    from ..text_corpus import read_documents, tokenize_documents

    settings = settings.validate()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    documents = read_documents(settings.text)
    tokenizer = build_tokenizer(documents, settings.vocab_size)
    with atomic_directory(out / TOKENIZER_DIR) as tmp:
        tokenizer.save_pretrained(tmp)
    bos = int(tokenizer.bos_token_id)
    pieces = tokenize_documents(documents, tokenizer)
    stream = np.concatenate([np.r_[bos, ids] for ids in pieces]).astype(np.int64)
    n_eval = max(settings.seq_len * 32, stream.size // 20)
    train_stream, eval_stream = stream[:-n_eval], stream[-n_eval:]  # the last documents are held out
    if train_stream.size < 4 * settings.seq_len:
        raise DataSourceError(f"text source {settings.text!r} has only {stream.size} tokens; too few to train on")
    vocab = len(tokenizer)
    rng = np.random.default_rng(settings.seed)
    eval_rng = np.random.default_rng([settings.seed, 1])
    eval_text = torch.as_tensor(text_batch(eval_stream, eval_rng, 32, settings.seq_len, bos))

    def batches(source_stream, generator, size, fraction):
        return make_copy_batch(source_stream, generator, batch_size=size, seq_len=settings.seq_len,
                               repeat_fraction=fraction, bos_id=bos,
                               copy_length=(settings.copy_min, settings.copy_max), copy_gap=settings.copy_gap)
    eval_repeat, eval_copied, eval_source = batches(eval_stream, eval_rng, 32, 1.0)
    eval_repeat = torch.as_tensor(eval_repeat)
    if settings.recipe == "position-blind":
        model = position_blind_model(settings, vocab, bos)
    else:
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
        evaluation = _evaluate(model, eval_text, eval_repeat, eval_copied, eval_source)
        model.train()

        with atomic_directory(out / CHECKPOINT_DIR / f"step_{step:06d}") as tmp:
            model.config._attn_implementation = "eager"  # what attention extraction reads
            try:
                model.save_pretrained(tmp)
            except SafetensorError as exc:  # a full disk inside the Rust writer: not an OSError, no file name
                raise OutputError(f"cannot write {str(out / CHECKPOINT_DIR / f'step_{step:06d}' / 'model.safetensors')!r}: "
                                  f"{exc}") from exc
            model.config._attn_implementation = "sdpa"
            tokenizer.save_pretrained(tmp)
        record["checkpoints"].append(dict(step=step, **evaluation))
        record["seconds"] = round(time.perf_counter() - started, 2)
        _write_json(out / LOG_FILE, record)
        log(f"step {step:5d}: text loss {evaluation['eval_loss_text']:.3f}, repeated tokens "
            f"{evaluation['eval_loss_repeat_first']:.3f} (first) -> {evaluation['eval_loss_repeat_second']:.3f} (copy)")

    model.train()
    if 0 in saves:
        save(0)
    bar = tqdm(range(1, settings.steps + 1), desc="training toy model", unit="step", disable=not progress)
    for step in bar:
        batch = torch.as_tensor(batches(train_stream, rng, settings.batch_size, settings.repeat_fraction)[0])
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


def _settings_text(path: Path) -> str:
    """The text source named in a run's ``train_toy.json``; FileFormatError if the file is damaged."""
    from cmr.checks import parse_json
    from cmr.errors import FileFormatError

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FileFormatError(f"{str(path)!r} cannot be read ({exc.strerror or exc}); expected the toy run's "
                              "settings written by icl-cmr train-toy") from None
    record = parse_json(raw, repr(str(path)))
    settings = record.get("settings") if isinstance(record, dict) else None
    text = settings.get("text") if isinstance(settings, dict) else None
    if not isinstance(text, str):
        raise FileFormatError(f"{str(path)!r} is not a toy run's settings: expected a JSON object with "
                              "'settings' holding a 'text' source; train again without --resume")
    return text


def prompt_words(run_dir, n_words: int) -> list[str]:
    """The ``n_words`` most frequent whole-word tokens (``' word'``) of the toy corpus.

    The same list is used at every checkpoint, so profiles are comparable across steps.
    """
    from transformers import AutoTokenizer

    from ..prompts import select_words
    from ..text_corpus import read_documents, tokenize_documents

    tokenizer = AutoTokenizer.from_pretrained(str(Path(run_dir) / TOKENIZER_DIR), local_files_only=True,
                                              trust_remote_code=False)
    settings = _settings_text(Path(run_dir) / SETTINGS_FILE)
    counts = np.bincount(np.concatenate(tokenize_documents(read_documents(settings), tokenizer)),
                         minlength=len(tokenizer)).astype(np.float64)
    _, words = select_words(tokenizer, np.log(counts + 0.5), int(n_words))  # corpus frequency as the prior
    return list(words)
