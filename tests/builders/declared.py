"""Data sets of declared tasks, built by the tests in every format the reader takes, and a tiny XLM-R-style model
whose Unigram tokenizer is trained here on French sentences.

Texts come from small word lists so their labels are known by construction: the five-class task's class is the
adjective's grade, the three-class pair task's class says whether the second text repeats, negates or changes the
first, the regression score is the count of "very".
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

GRADES = ("awful", "bad", "fine", "good", "great")
CLASSES5 = ("very negative", "negative", "neutral", "positive", "very positive")
NOUNS = ("film", "book", "meal", "song", "trip", "play", "show", "game")


def five_class(n: int = 60) -> pd.DataFrame:
    """Single-text, five string classes: `sentence`, `sentiment` (a class name)."""
    rows = [{"sentence": f"the {NOUNS[i % len(NOUNS)]} was {GRADES[i % 5]} .", "sentiment": CLASSES5[i % 5]}
            for i in range(n)]
    return pd.DataFrame(rows)


def three_class_pairs(n: int = 60) -> pd.DataFrame:
    """Pairs, three classes: `premise`, `hypothesis`, `gold` (entails | contradicts | unrelated)."""
    rows = []
    for i in range(n):
        noun, other = NOUNS[i % len(NOUNS)], NOUNS[(i + 3) % len(NOUNS)]
        premise = f"the {noun} was good ."
        kind = ("entails", "contradicts", "unrelated")[i % 3]
        hypothesis = {"entails": f"the {noun} was good .", "contradicts": f"the {noun} was not good .",
                      "unrelated": f"a {other} is long ."}[kind]
        rows.append({"premise": premise, "hypothesis": hypothesis, "gold": kind})
    return pd.DataFrame(rows)


def regression(n: int = 60) -> pd.DataFrame:
    """Single-text regression: `text`, `score` (float, the number of "very")."""
    rows = [{"text": "the film was " + "very " * (i % 4) + "good .", "score": float(i % 4)} for i in range(n)]
    return pd.DataFrame(rows)


FR_NOUNS = ("le chat", "la fille", "le garçon", "la femme", "le chien", "l'homme", "la voisine", "le professeur")
FR_VERBS = ("mange", "regarde", "aime", "cherche", "trouve", "voit")
FR_OBJECTS = ("une pomme", "le livre", "la maison", "un gâteau", "la voiture", "le jardin")


def french_pairs(n: int = 48) -> pd.DataFrame:
    """French pairs, three classes: `phrase1`, `phrase2`, `etiquette` (implication | contradiction | neutre)."""
    rows = []
    for i in range(n):
        s, v, o = FR_NOUNS[i % len(FR_NOUNS)], FR_VERBS[i % len(FR_VERBS)], FR_OBJECTS[i % len(FR_OBJECTS)]
        first = f"{s.capitalize()} {v} {o}."
        kind = ("implication", "contradiction", "neutre")[i % 3]
        second = {"implication": f"{s.capitalize()} {v} {o}.", "contradiction": f"{s.capitalize()} ne {v} pas {o}.",
                  "neutre": f"{FR_NOUNS[(i + 1) % len(FR_NOUNS)].capitalize()} dort."}[kind]
        rows.append({"phrase1": first, "phrase2": second, "etiquette": kind})
    return pd.DataFrame(rows)


FR_WORDS = ("maison voiture jardin fenêtre porte table chaise livre cahier stylo école classe élève ville village "
            "rue route pont rivière montagne forêt arbre fleur herbe soleil lune étoile nuage pluie neige vent "
            "matin soir nuit journée semaine année mois heure minute enfant parent frère sœur oncle tante cousin "
            "ami amie voisin médecin boulanger marché magasin pain fromage lait café thé sucre sel poivre viande "
            "poisson légume fruit pomme poire orange citron raisin fraise cerise gâteau tarte soupe salade repas "
            "manger boire dormir courir marcher parler écouter regarder chanter danser lire écrire jouer travailler "
            "rapidement lentement toujours jamais souvent parfois ensemble seulement vraiment beaucoup peu très "
            "grand petit beau belle joli vieux jeune nouveau heureux triste content fatigué rouge bleu vert jaune").split()


def french_corpus() -> list[str]:
    """Sentences for training the tiny model's tokenizer: the pair task's texts and every word of FR_WORDS."""
    df = french_pairs(48)
    words = list(FR_WORDS)
    return (list(df["phrase1"]) + list(df["phrase2"])
            + [" ".join(words[i:i + 6]) for i in range(0, len(words), 3)])


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    df.to_csv(path, index=False)
    return path


def write_jsonl(df: pd.DataFrame, path: Path) -> Path:
    df.to_json(path, orient="records", lines=True, force_ascii=False)
    return path


def write_parquet(df: pd.DataFrame, path: Path) -> Path:
    df.to_parquet(path, index=False)
    return path


def write_disk(df: pd.DataFrame, path: Path, *, label: str, names: tuple[str, ...],
               validation: pd.DataFrame | None = None) -> Path:
    """A save_to_disk DatasetDict whose `label` column is a ClassLabel of `names` (train, and validation if given)."""
    import datasets

    def one(frame: pd.DataFrame) -> datasets.Dataset:
        frame = frame.assign(**{label: [names.index(x) for x in frame[label]]})
        features = datasets.Features({c: datasets.Value("string") for c in frame.columns if c != label}
                                     | {label: datasets.ClassLabel(names=list(names))})
        return datasets.Dataset.from_pandas(frame, features=features, preserve_index=False)

    splits = {"train": one(df)}
    if validation is not None:
        splits["validation"] = one(validation)
    datasets.disable_progress_bars()
    datasets.DatasetDict(splits).save_to_disk(str(path))
    return path


def build_tiny_xlmr(path: Path, corpus: list[str], *, vocab_size: int = 300, seed: int = 0) -> Path:
    """A tiny random XLM-RoBERTa (2 layers x 4 heads, hidden 32) with a Unigram tokenizer trained on `corpus`:
    ``<s> a </s></s> b </s>``, no token types, as XLM-R's own tokenizer (save_pretrained, safetensors)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(corpus, trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                            unk_token="<unk>", show_progress=False))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                                   sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>",
                                   model_input_names=["input_ids", "attention_mask"])
    config = XLMRobertaConfig(vocab_size=len(fast), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=64, max_position_embeddings=130, type_vocab_size=1,
                              pad_token_id=fast.pad_token_id, bos_token_id=bos, eos_token_id=eos,
                              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.3)
    torch.manual_seed(seed)
    XLMRobertaModel(config).save_pretrained(path, safe_serialization=True)
    fast.save_pretrained(path)
    return Path(path)
