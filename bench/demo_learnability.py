"""How learnable are the demo tasks? A bag-of-words baseline and a short fine-tuning of a real encoder.

    .venv/bin/python bench/demo_learnability.py --tasks sst2 mrpc rte --train 600 --validation 200 \
        --epochs 3 --batch-size 32 --lr 2e-5 [--init untrained pretrained random] [--model minilm-l6] \
        [--loop plain|pipeline]

Prints one line per task and init: validation accuracy of a binary bag-of-words logistic regression
(pair tasks: words in both texts / only in text_a / only in text_b), of the best single-word rule, and of
the classifier: `untrained` = the pretrained encoder with a fresh head seeded by --seed (Table 1's
`pretrained`), `pretrained` / `random` = fine-tuned from that init. `--loop plain` (the default) is a
plain PyTorch loop (AdamW, linear decay), independent of the training rules; `--loop pipeline` trains
and evaluates with bertology.models.training, as the train_model and score rules do (Table 1).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

from bertology.demo import generate
from bertology.models.encoding import encode
from bertology.models.loading import load_classifier, load_tokenizer, resolve_model
from bertology.pipeline.tasks import get_task

WORD = r"[a-z']+"


def bow_accuracy(train: pd.DataFrame, val: pd.DataFrame) -> float:
    vec = CountVectorizer(token_pattern=WORD).fit(pd.concat([train["text_a"], train["text_b"].dropna()]))

    def features(df: pd.DataFrame) -> sp.csr_matrix:
        a = (vec.transform(df["text_a"]) > 0).astype(float)
        if df["text_b"].isna().all():
            return a.tocsr()
        b = (vec.transform(df["text_b"]) > 0).astype(float)
        both = a.multiply(b)
        return sp.hstack([both, a - both, b - both]).tocsr()

    clf = LogisticRegression(max_iter=2000).fit(features(train), train["label"])
    return float((clf.predict(features(val)) == val["label"]).mean())


def single_word_accuracy(train: pd.DataFrame, val: pd.DataFrame) -> float:
    """Validation accuracy of the best 'majority label given whether word w occurs' rule (chosen on train)."""
    vec = CountVectorizer(token_pattern=WORD, binary=True)
    x_tr = vec.fit_transform(train["text_a"] + " " + train["text_b"].fillna("")).toarray() > 0
    x_va = vec.transform(val["text_a"] + " " + val["text_b"].fillna("")).toarray() > 0
    y_tr, y_va = train["label"].to_numpy(), val["label"].to_numpy()
    majority = np.bincount(y_tr).argmax()
    best, best_rule = -1.0, (0, majority, majority)
    for j in range(x_tr.shape[1]):
        on, off = x_tr[:, j], ~x_tr[:, j]
        lab_on = np.bincount(y_tr[on]).argmax() if on.any() else majority
        lab_off = np.bincount(y_tr[off]).argmax() if off.any() else majority
        acc = (np.where(on, lab_on, lab_off) == y_tr).mean()
        if acc > best:
            best, best_rule = acc, (j, lab_on, lab_off)
    j, lab_on, lab_off = best_rule
    return float((np.where(x_va[:, j], lab_on, lab_off) == y_va).mean())


def finetune_accuracy(model_dir: str, task: str, init: str, train: pd.DataFrame, val: pd.DataFrame, *,
                      epochs: int, batch_size: int, lr: float, max_length: int, seed: int) -> float:
    spec = get_task(task)
    tok = load_tokenizer(model_dir)
    model = load_classifier(model_dir, spec.num_labels, init="pretrained" if init == "untrained" else init, seed=seed)
    enc_tr, enc_va = encode(tok, train, max_length), encode(tok, val, max_length)
    labels = torch.tensor(train["label"].to_numpy())
    epochs = 0 if init == "untrained" else epochs
    steps = max(1, epochs * int(np.ceil(len(train) / batch_size)))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10))
                                              * max(0.0, 1 - s / steps))
    gen = torch.Generator().manual_seed(seed)

    def batch(enc, rows):
        feats = [{k: enc[k][i] for k in ("input_ids", "attention_mask", "token_type_ids")} for i in rows]
        return tok.pad(feats, return_tensors="pt")

    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(train), generator=gen).tolist()
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            out = model(**batch(enc_tr, rows), labels=labels[rows])
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
    model.eval()
    preds = []
    with torch.no_grad():
        for start in range(0, len(val), 64):
            preds.append(model(**batch(enc_va, range(start, min(start + 64, len(val))))).logits.argmax(-1))
    return float((torch.cat(preds).numpy() == val["label"].to_numpy()).mean())


def pipeline_accuracy(model_dir: str, task: str, init: str, train: pd.DataFrame, val: pd.DataFrame, *,
                      epochs: int, batch_size: int, lr: float, max_length: int, seed: int) -> float:
    """Accuracy after bertology.models.training.train (length-bucketed batches, warm-up, no decay on biases and
    norms), evaluated with bertology.models.training.evaluate; init `untrained` = no training."""
    from bertology.pipeline.config import TrainConfig, build, validate_config
    from bertology.models.encoding import encode_split
    from bertology.models.training import evaluate, select_device, train as train_model

    spec = get_task(task)
    tok = load_tokenizer(model_dir)
    train_section = validate_config({"train": {"epochs": epochs, "batch_size": batch_size,
                                               "learning_rate": lr, "seed": seed}})["train"]
    cfg = build(TrainConfig, train_section, prefix="train.")
    device = select_device("cpu")
    model = load_classifier(model_dir, spec.num_labels, init="pretrained" if init == "untrained" else init,
                            seed=seed, id2label=spec.id2label)
    if init != "untrained":
        train_model(model, tok, encode_split(tok, train, spec, max_length), spec, cfg, device=device,
                    progress=False)
    metrics = evaluate(model, tok, encode_split(tok, val, spec, max_length), spec,
                       batch_size=cfg.eval_batch_size, device=device)
    return float(metrics["accuracy"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="+", default=["sst2", "mrpc", "rte"])
    ap.add_argument("--model", default="minilm-l6")
    ap.add_argument("--init", nargs="+", default=["pretrained"], choices=["untrained", "pretrained", "random"])
    ap.add_argument("--loop", default="plain", choices=["plain", "pipeline"])
    ap.add_argument("--train", type=int, default=600)
    ap.add_argument("--validation", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-finetune", action="store_true", help="only the bag-of-words baselines")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model_dir = resolve_model(args.model)
    for task in args.tasks:
        train = generate(task, "train", args.train, args.seed)
        val = generate(task, "validation", args.validation, args.seed)
        line = (f"{task}: n={len(train)}/{len(val)} bag-of-words {bow_accuracy(train, val):.3f} "
                f"best-single-word {single_word_accuracy(train, val):.3f}")
        if args.no_finetune:
            print(line, flush=True)
            continue
        for init in args.init:
            start = time.perf_counter()
            measure = pipeline_accuracy if args.loop == "pipeline" else finetune_accuracy
            acc = measure(model_dir, task, init, train, val, epochs=args.epochs, batch_size=args.batch_size,
                          lr=args.lr, max_length=args.max_length, seed=args.seed)
            print(f"{line} {args.model}/{init} {acc:.3f} ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
