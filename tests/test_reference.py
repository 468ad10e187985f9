"""docs/reference.md says what the code does: its config table, store schema, table columns and result paths are
compared with the schema, the store module, the tables the code builds and the workflow's outputs.

Each check reads a block of the reference between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` (a Markdown
table) and compares it with the code, both ways where both sides can be listed. A change to a column, a key, a
default, a store variable or an output path that forgets the reference fails here, with the difference.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference.md"
SCHEMA = REPO / "src" / "bertology" / "config.schema.yaml"


# --------------------------------------------------------------------------------------------------
# reading the reference


def block_rows(name: str) -> list[list[str]]:
    """The body rows (cells stripped) of the Markdown table between <!-- name:begin --> and <!-- name:end -->."""
    text = REFERENCE.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {name}:begin -->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert match, f"docs/reference.md has no <!-- {name}:begin --> ... <!-- {name}:end --> block"
    lines = [ln.strip() for ln in match.group(1).splitlines() if ln.strip().startswith("|")]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]  # skip header and separator
    assert rows, f"the {name} block of docs/reference.md holds no table rows"
    return rows


def code(cell: str) -> list[str]:
    """The `backticked` strings of a cell."""
    return re.findall(r"`([^`]+)`", cell)


def column_list(cell: str) -> list[str]:
    (inner,) = code(cell)
    return [c.strip() for c in inner.split(",")]


def section(anchor: str) -> str:
    """The reference's text from <a id="anchor"> to the next anchor."""
    text = REFERENCE.read_text(encoding="utf-8")
    start = text.index(f'<a id="{anchor}"></a>')
    nxt = text.find("<a id=", start + 1)
    return text[start:nxt if nxt > 0 else None]


# --------------------------------------------------------------------------------------------------
# configuration


def schema_defaults(node: dict, prefix: str = "") -> dict[str, object]:
    """Every leaf key of the config schema (dotted) -> its default."""
    out: dict[str, object] = {}
    props = node.get("properties")
    if node.get("type") == "object" and props:
        for key, sub in props.items():
            out.update(schema_defaults(sub, f"{prefix}.{key}" if prefix else key))
    else:
        out[prefix] = node.get("default")
    return out


def test_every_config_key_is_documented_with_its_default():
    schema = schema_defaults(yaml.safe_load(SCHEMA.read_text()))
    documented = {code(key)[0]: code(default)[0] for key, default, *_ in block_rows("config")}
    assert sorted(set(schema) - set(documented)) == [], "keys of the schema missing from docs/reference.md#config"
    assert sorted(set(documented) - set(schema)) == [], "keys documented in docs/reference.md#config but not in the schema"
    wrong = {k: (v, schema[k]) for k, v in documented.items() if yaml.safe_load(v) != schema[k]}
    assert wrong == {}, "defaults in docs/reference.md#config (documented, schema) that differ"


# --------------------------------------------------------------------------------------------------
# the attention store


def test_store_variables_are_documented():
    from bertology.store import DIMS, DTYPES, OPTIONAL_DIMS, OPTIONAL_DTYPES

    documented = {code(var)[0]: (tuple(column_list(dims)), code(dtype)[0])
                  for var, dims, dtype, *_ in block_rows("store-variables")}
    every = {**DIMS, **OPTIONAL_DIMS}
    dtypes = {**DTYPES, **OPTIONAL_DTYPES}
    assert documented == {v: (tuple(every[v]), dtypes[v]) for v in every}


def test_store_identity_and_layout_attributes_are_documented():
    from bertology.store import IDENTITY_ATTRS, LAYOUT_ATTRS

    text = section("store-attributes")
    missing = [a for a in IDENTITY_ATTRS + LAYOUT_ATTRS + ("complete", "chunks_done") if f"`{a}`" not in text]
    assert missing == [], "store attributes missing from docs/reference.md#store-attributes"


# --------------------------------------------------------------------------------------------------
# table columns: every documented table against what the code builds


def _kovaleva_tables() -> dict[str, list[str]]:
    from bertology.clark import reduce as clred
    from bertology.kovaleva import reduce as red
    from bertology.attention.onepass import StoreInfo
    from bertology.stats.moments import Moments, moments_table

    part = red.empty_partial(2, 3)
    info = StoreInfo("s.zarr", None, 2, 3, {}, np.arange(4))
    clark = clred.ClarkKernel().empty(info)
    pair = red.PairPartial(Moments.zeros((2, 3)), Moments.zeros((2, 3, part.features.total.shape[-1])))
    relations = red.relations_table(part.dependency, "dependency", 99.0)
    return {"stats/{task}/{variant}/patterns.csv": red.patterns_table(np.ones((2, 3, part.patterns.shape[-1]), int)),
            "stats/{task}/{variant}/features.csv": red.features_table(part),
            "stats/{task}/{variant}/cls.csv": red.cls_table(part, 2),
            "stats/{task}/{variant}/relations.csv": relations,
            "stats/{task}/{variant}/relations_framenet.csv": relations,
            "stats/{task}/{variant}/entropy.csv": clred.entropy_table(clark),
            "stats/{task}/{variant}/parser.csv": clred.parser_table(clark),
            "stats/syntax/{model}.csv": clred.parser_table(clark),
            "stats/{task}/cosine{seedtag}.csv": moments_table(pair.cosine),
            "stats/{task}/features_diff{seedtag}.csv": red.features_diff_table(pair)}


def _sieve_tables(tmp_path: Path) -> dict[str, object]:
    import xarray as xr

    from bertology.sieve import roles_for
    from bertology.sieve.reduce import sieve_table
    from bertology.sieve.summary import sieve_delta, summarize
    from bertology.sieve.scores_io import write_scores

    roles = roles_for(True)
    rng = np.random.default_rng(0)
    scores = rng.uniform(0.5, 6.0, size=(5, 2, 2, len(roles)))
    pre = sieve_table(scores, roles, tau=3.0, alpha=0.05, correction="none")
    fine = sieve_table(scores[::-1] * 1.1, roles, tau=3.0, alpha=0.05, correction="fdr_bh")
    arr = xr.DataArray(scores, dims=("example", "layer", "head", "role"),
                       coords={"example_idx": ("example", np.arange(5)), "layer": [0, 1], "head": [0, 1],
                               "role": list(roles)})
    npz = write_scores(tmp_path / "sieve_scores.npz", arr, task="mrpc")
    with np.load(npz) as z:
        arrays = list(z.files)
    return {"stats/{task}/{variant}/sieve.csv": pre,
            "stats/{task}/{variant}/sieve_scores.npz": arrays,
            "stats/sieve_delta{seedtag}.csv": sieve_delta(pre, fine, "mrpc"),
            "stats/sieve_summary.csv": list(summarize(pre, arr, task="mrpc", variant="pretrained"))}


def _ablation_tables() -> dict[str, object]:
    from bertology.ablation.importance import Importance
    from bertology.ablation.pruning import pruning_fractions, pruning_plan, pruning_table
    from bertology.ablation.significance import sweep_tables
    from bertology.ablation.sweep import sweep_configurations

    rng = np.random.default_rng(0)
    labels = np.array([0, 1, 0, 1, 1, 0, 1, 0])
    logits = rng.normal(size=(len(sweep_configurations(2, 2)), len(labels), 2))
    tables = sweep_tables("mrpc", labels, logits, 2, 2, n_boot=5, seed=0, alpha=0.05)
    raw = rng.uniform(size=(2, 2))
    importance = Importance(raw=raw, importance=raw / np.linalg.norm(raw, axis=1, keepdims=True), n=8)
    plan, masks = pruning_plan(raw, pruning_fractions(0.5), [43])
    pruning = pruning_table(plan, rng.normal(size=(len(plan), len(labels), 2)), labels, ("f1", "accuracy"), False,
                            "zero")
    return {"ablation/{task}/heads{seedtag}.csv": tables.heads, "ablation/{task}/layers{seedtag}.csv": tables.layers,
            "ablation/{task}/summary{seedtag}.csv": tables.summary, "ablation/{task}/importance{seedtag}.csv": importance.frame("train"),
            "ablation/{task}/pruning{seedtag}.csv": pruning}


def _table1_tables() -> dict[str, object]:
    from bertology.models.table1 import aggregate_seeds, scores_frame, variant_tests

    records = [{"task": "rte", "variant": v, "seed": s, "metrics": {"accuracy": 0.5 + 0.01 * s + 0.1 * i}, "n": 10}
               for i, v in enumerate(("pretrained", "finetuned")) for s in (1, 2, 3)]
    per_seed = scores_frame(records)
    return {"tables/table1.csv": aggregate_seeds(per_seed), "tables/table1_tests.csv": variant_tests(per_seed, alpha=0.05)}


def _data_tables() -> dict[str, object]:
    from bertology.store.words import WORD_COLUMNS
    from bertology.clark.conllu import SENTENCE_COLUMNS
    from bertology.data import COLUMNS
    from bertology.kovaleva.framenet import COUNT_KEYS, links_table

    return {"data/{task}/{split}.parquet": COLUMNS, "data/{task}/sample.parquet": COLUMNS,
            "data/{task}/words.parquet": WORD_COLUMNS, "data/syntax/sentences.csv": SENTENCE_COLUMNS,
            "data/framenet/links.parquet": links_table([]), "data/framenet/counts.json": list(COUNT_KEYS)}


def _best_heads(tmp_path: Path) -> dict[str, object]:
    """best_heads.csv as the syntax_figures step writes it (through the command line, as its rule runs it)."""
    from bertology.workflow.cli import STEPS
    from bertology.clark.parser import COLUMNS
    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_json
    from tests.builders.steps import run_step

    rows = [{"relation": r, "direction": d, "layer": 0, "head": h, "accuracy": 0.1 * (h + 1), "n": 25,
             "baseline_offset": -1, "baseline_accuracy": 0.2}
            for r in ("nsubj", "obj") for d in ("dep_to_head", "head_to_dep") for h in range(2)]
    tables = []
    for model in ("pretrained", "rte-finetuned"):
        path = tmp_path / f"{model}.csv"
        pd.DataFrame(rows, columns=COLUMNS).to_csv(path, index=False)
        tables.append(path)
    best = tmp_path / "best_heads.csv"
    cfg = sections_json(validate_config({}), STEPS["syntax_figures"].config)
    assert run_step("syntax_figures", cfg, inputs={"tables": tables},
                    outputs={"figure": tmp_path / "parser-syntax.png", "best": best}, options=("--no-mlflow",)) == 0
    return {"stats/syntax/best_heads.csv": pd.read_csv(best)}


def _norms_tables() -> dict[str, object]:
    from bertology.norms.alti_logit import DECISION_COLUMNS
    from bertology.norms.analysis import LAYER_COLUMNS, SCORE_COLUMNS
    from bertology.claims.decision import decision_share
    from bertology.norms.concentration import token_concentration
    from bertology.norms.faithful import summarise
    from bertology.norms.ranking import paired_differences
    from bertology.norms.norm_stats import MixingStats, NormStats

    norms = NormStats(1, 1)
    norms.update(np.full((1, 1, 3, 3), 1 / 3), np.ones((1, 1, 3)), np.array([0, 3, 1]), np.array([5.0, 2.0, 7.0]))
    mixing = MixingStats(1)
    mixing.update(np.full((1, 5, 3), 0.5))
    rhos = pd.DataFrame({"example_idx": [0, 1], "view": "raw", "importance": "ablation", "rho": [0.1, 0.3]})
    return {"stats/{task}/{variant}/norms.csv": norms.table(), "stats/{task}/{variant}/mixing.csv": mixing.table(),
            "stats/{task}/{variant}/token_scores.parquet": SCORE_COLUMNS,
            "stats/{task}/finetuned{seedtag}/faithfulness.csv": summarise(rhos, confidence=0.95, resamples=20, seed=0),
            "stats/{task}/finetuned{seedtag}/faithfulness_examples.csv": rhos,
            "stats/{task}/finetuned{seedtag}/faithfulness_pairs.csv": paired_differences(
                pd.concat([rhos, rhos.assign(view="alti")]), confidence=0.95, resamples=20, seed=0),
            "stats/{task}/{variant}/mixing_layers.parquet": LAYER_COLUMNS,
            "stats/{task}/{variant}/decision.parquet": DECISION_COLUMNS,
            "stats/{task}/finetuned{seedtag}/importance.parquet": SCORE_COLUMNS,
            "stats/{task}/{variant}/decision_share.csv": decision_share(pd.DataFrame(
                [(e, 0, "head", 0, 1.0 + e, 0.5, 1, 0) for e in range(3)], columns=list(DECISION_COLUMNS)),
                resamples=20, confidence=0.95, seed=0),
            "stats/{task}/{variant}/concentration.csv": token_concentration(pd.DataFrame(
                {"example_idx": [0, 0], "position": [0, 1], "word": ["a", "b"], "method": "raw",
                 "score": [0.25, 0.75]}))["table"]}


def _seed_tables() -> dict[str, object]:
    from bertology.stats import across_seeds as ss

    sieve = [pd.DataFrame({"layer": [0, 0], "head": [0, 1], "role": "local", "mean": [1.0, 2.0],
                           "assigned": [True, s == 2]}) for s in (1, 2)]
    roles, agreement = ss.role_tables(sieve, [1, 2])
    mb = ss.multibootstrap_table(np.ones((2, 3, 2)), ss.head_grid_labels(1, 2), quantity="cosine", resamples=10,
                                 seed=0, confidence=0.9).reindex(columns=list(ss.MULTIBOOTSTRAP_COLUMNS))
    from bertology.claims.ledger import findings_view

    ledger = pd.DataFrame([{"claim": "kovaleva_cosine_last_layers", "paper": "Kovaleva et al. 2019", "section": "4.3",
                            "statement": "s", "task": "rte", "variant": "finetuned", "seed_verdicts": "holds;inconclusive",
                            "seeds": "1;2"}])
    found = findings_view(ledger, "rte")
    return {"stats/{task}/seeds/roles.csv": roles, "stats/{task}/seeds/role_agreement.csv": agreement,
            "stats/{task}/seeds/multibootstrap.csv": mb, "stats/{task}/seeds/findings.csv": found}


def _decoder_tables() -> dict[str, object]:
    """The decoder probe's tables, from its own functions on a tiny random Llama (two models of the probe)."""
    import torch
    from transformers import LlamaConfig, LlamaModel

    from bertology.decoders import probe

    torch.manual_seed(0)
    model = LlamaModel(LlamaConfig(hidden_size=16, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=1,
                                   intermediate_size=32, vocab_size=50, max_position_embeddings=64),
                       ).eval()
    model.config._attn_implementation = "eager"
    ids, mask = np.array([[3, 4, 5], [6, 7, 0]]), np.array([[1, 1, 1], [1, 1, 0]])
    tokens, maps = probe.induction_probe(model, seed=0, seq_len=4, batch=2, bos_id=1)
    sink = {v: probe.sink_units(model, [(ids, mask)]) for v in ("pretrained", "finetuned")}
    induction = {v: probe.induction_units(tokens, maps, 4) for v in ("pretrained", "finetuned")}
    sink_df, induction_df = probe.probe_tables(sink, induction)
    return {"stats/{task}/decoder_sink.csv": list(sink_df.columns),
            "stats/{task}/decoder_induction.csv": list(induction_df.columns),
            "stats/{task}/{variant}/decoder_sink.csv": list(sink_df.columns),
            "stats/{task}/{variant}/decoder_induction.csv": list(induction_df.columns),
            "stats/{task}/{variant}/decoder_heads.csv": list(probe.head_summary(sink["pretrained"],
                                                                                 induction["pretrained"]).columns)}


def _claims_tables(tmp) -> dict[str, object]:
    from bertology.analyses import REGISTRY
    from bertology.claims.ledger import build_ledger
    from bertology.claims.bootstrap import Boot

    return {"claims.csv": build_ledger(tmp, REGISTRY.claims(), ["rte"], [42], Boot(resamples=10, confidence=0.95, seed=0))}


def _store_tables(tmp_path: Path, config) -> dict[str, object]:
    """Every table of the one read of a store, as each kernel of the registry writes it (built from the default
    config, run on a small store of known examples): a new store analysis is checked here without an edit."""
    from bertology.analyses import REGISTRY
    from bertology.attention.onepass import Job, reduce_store
    from bertology.store import open_store
    from tests.builders import kovaleva as kb

    examples = [kb.pair_example(), kb.single_example(), kb.long_example(5, 4)]
    store = kb.write_store(kb.build_store(examples, kb.maps), tmp_path / "s.zarr", chunk=2)
    words = kb.words_table(examples)
    job = Job(config, "rte", "pretrained", str(store), open_store(store), words, {})
    kernels = [cls.build(job) for cls in REGISTRY.store_kernels()]
    results = reduce_store(store, kernels, words, compute_kwargs={"scheduler": "synchronous"})
    out = {}
    for k in kernels:
        declared = REGISTRY.kernel_tables(type(k))
        for name, table in k.outputs(results[k.name], job).tables.items():
            out[declared[name].path] = table
    return out


@pytest.fixture(scope="module")
def code_tables(tmp_path_factory, typed_config) -> dict[str, list[str]]:
    """Every table the reference documents -> the columns (arrays, keys) the code gives it."""
    tmp = tmp_path_factory.mktemp("reference")
    built: dict[str, object] = {**_kovaleva_tables(), **_sieve_tables(tmp), **_ablation_tables(), **_table1_tables(),
                                **_data_tables(), **_best_heads(tmp), **_norms_tables(), **_seed_tables(),
                                **_store_tables(tmp, typed_config()), **_claims_tables(tmp), **_decoder_tables()}
    return {k: list(v.columns) if isinstance(v, pd.DataFrame) else list(v) for k, v in built.items()}


def test_every_documented_table_has_the_columns_the_code_writes(code_tables):
    documented = {code(table)[0]: column_list(columns) for table, columns, *_ in block_rows("columns")}
    assert sorted(set(documented) - set(code_tables)) == [], "tables documented but not checked by this test"
    assert sorted(set(code_tables) - set(documented)) == [], "tables the code writes missing from the reference"
    wrong = {t: {"documented": documented[t], "code": code_tables[t]} for t in documented
             if documented[t] != code_tables[t]}
    assert wrong == {}, "docs/reference.md#columns differs from the code"


def test_the_registry_declares_the_documented_columns(code_tables):
    """Every table of an analysis is declared once, in bertology.registry, with the columns the reference documents
    and the code writes."""
    from bertology.analyses import REGISTRY

    documented = {code(table)[0]: column_list(columns) for table, columns, *_ in block_rows("columns")}
    declared = {path: list(columns) for path, columns in REGISTRY.tables().items()}
    wrong = {t: {"registry": c, "reference": documented.get(t), "code": code_tables.get(t)} for t, c in declared.items()
             if documented.get(t) != c or code_tables.get(t) != c}
    assert wrong == {}, "bertology.registry's columns differ from docs/reference.md#columns or from the code"
    # the tables outside the registry are inputs and intermediate files, not an analysis's outputs
    assert sorted(set(documented) - set(declared)) == [
        "data/syntax/sentences.csv", "data/{task}/sample.parquet", "data/{task}/words.parquet",
        "data/{task}/{split}.parquet"]


# --------------------------------------------------------------------------------------------------
# result paths: every output of the workflow matches a documented path


def layout_patterns() -> list[str]:
    return [p for cell, *_ in block_rows("layout") for p in code(cell)]


def pattern_regex(pattern: str) -> re.Pattern:
    """A documented path -> a regex: wildcards and {a,b} alternatives as groups, '...' as anything."""
    from bertology.pipeline.tasks import SCORE_VARIANTS, SPLITS, TASKS

    tasks = "|".join(TASKS)
    values = {"task": tasks, "split": "|".join(SPLITS), "init": "pretrained|random", "name": "[a-z_]+",
              "variant": "|".join(SCORE_VARIANTS) + r"|finetuned-seed\d+", "seedtag": r"(?:-seed\d+)?", "rule": "[a-z_]+",
              "model": rf"pretrained|(?:{tasks})-finetuned(?:-seed\d+)?"}
    out = ""
    for part in re.split(r"(\{[^}]*\}|\.\.\.)", pattern.rstrip("/")):
        if part == "...":
            out += ".*"
        elif part.startswith("{"):
            name = part[1:-1]
            out += f"(?:{values[name]})" if name in values else "(?:" + "|".join(map(re.escape, name.split(","))) + ")"
        else:
            out += re.escape(part)
    return re.compile(out + "/?")


def test_layout_names_every_output_of_the_workflow(tmp_path, config_file, snakemake_run):
    """Every file and directory a run would write (default config plus seeds and FrameNet, as `snakemake
    --summary` lists them) matches a path of docs/reference.md#layout."""
    release = tmp_path / "framenet"
    release.mkdir()
    cfg = yaml.safe_load(Path(config_file(tmp_path)).read_text())
    cfg["train"]["seeds"] = [42, 43]
    cfg["analysis"] = {"relations": {"framenet": str(release)}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake_run(tmp_path, "--summary", "--cores", "1")
    outputs = [line.split("\t")[0] for line in proc.stdout.splitlines()[1:] if line.startswith("results/")]
    assert len(outputs) > 50, proc.stdout[-2000:]
    patterns = [pattern_regex(p) for p in layout_patterns()]
    undocumented = sorted(p for p in outputs if not any(r.fullmatch(p) for r in patterns))
    assert undocumented == [], "outputs missing from docs/reference.md#layout"
    for seeded in ("results/scores/mrpc/finetuned-seed43.json", "results/data/framenet/counts.json"):
        assert seeded in outputs  # the config above reached the workflow


def test_every_documented_table_has_a_documented_path():
    paths = set(layout_patterns())
    orphans = [t for t in (code(table)[0] for table, *_ in block_rows("columns")) if f"results/{t}" not in paths]
    assert orphans == [], "tables of docs/reference.md#columns with no row in #layout"


def test_the_code_cites_the_reference_not_an_outside_file():
    """The code's citations point into docs/reference.md, and every anchor cited exists."""
    text = REFERENCE.read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    cited, outside = set(), []
    for path in [*REPO.glob("src/**/*.py"), *REPO.glob("rules/*.smk"), *REPO.glob("tests/**/*.py"),
                 *REPO.glob("bench/*.py"), REPO / "Snakefile", REPO / "README.md", REPO / "CONTRIBUTING.md"]:
        body = path.read_text(encoding="utf-8")
        cited |= set(re.findall(r"docs/reference\.md#([A-Za-z0-9_-]+)", body))
        if path.name != "test_reference.py" and re.search(r"DESIGN(\.md| section)", body):
            outside.append(str(path.relative_to(REPO)))
    assert outside == [], "files citing DESIGN.md, a file outside the repository: cite docs/reference.md"
    assert sorted(cited - anchors) == [], "anchors cited in the code that docs/reference.md lacks"


def _steps_table() -> str:
    """The reference's table of steps, from the registry: each step, the config sections it reads, what it does."""
    from bertology.analyses import REGISTRY

    rows = ["| step | config sections | what it does |", "|---|---|---|"]
    for name, st in REGISTRY.steps().items():
        sections = ", ".join(f"`{x}`" for x in st.config) or "none"
        rows.append(f"| `{name}` | {sections} | {st.help.replace('|', '/')} |")
    return "\n".join(rows)


def test_the_steps_table_is_the_registrys():
    """docs/reference.md#steps lists every step with the config sections its registry declaration reads."""
    import os

    text = REFERENCE.read_text()
    begin, end = "<!-- steps:begin -->\n", "<!-- steps:end -->"
    head, rest = text.split(begin)
    body, tail = rest.split(end)
    want = _steps_table() + "\n"
    if os.environ.get("BERTOLOGY_WRITE_REFERENCE") == "1":
        REFERENCE.write_text(head + begin + want + end + tail)
        body = want
    assert body == want, "docs/reference.md#steps differs from the registry (BERTOLOGY_WRITE_REFERENCE=1 rewrites it)"
