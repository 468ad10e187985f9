"""Snakemake's own report (``snakemake --report report.zip`` after a run): what the rules flag with ``report()``.

The figures, results/tables/table1.csv, results/claims.csv, the forest plot and results/report.html are flagged
in their rules (``reported`` in rules/steps.smk): each gets a category (the paper its report section follows,
:attr:`bertology.registry.Section.paper`), a subcategory (the section's title) and a caption, an RST file under
``report/captions/`` written from the registry's section text (what it measures, what the paper found) by
:func:`write_captions` (``python -m bertology.report.native``; ``tests/test_report.py`` checks the committed files
are the registry's). The workflow's description is ``report/workflow.rst`` (the Snakefile's ``report:``).
"""

from __future__ import annotations

import re
from pathlib import Path

from bertology.analyses import REGISTRY
from bertology.registry import Section

#: the caption files, relative to the workflow's directory
CAPTIONS = "report/captions"
#: the outputs that are not a section's figure: name -> (category, subcategory, caption title, caption text)
OTHERS: dict[str, tuple[str, str, str, str]] = {
    "claims": ("Claims", "The ledger", "The papers' claims checked on this run",
               "claims.csv (and claims.md): one row per claim and task (a claim whose inputs do not depend on "
               "the task: one row, task all), with the effect, its interval, what the interval rests on (rests_on), "
               "a named one-sided test, Holm's correction over the run and the verdict: holds (the interval lies "
               "wholly on the paper's side of the null), contradicted (wholly on the other side), inconclusive "
               "(otherwise, or no interval) or not computed (the run lacks the claim's tables). The forest plot, "
               "figures/claims.png, draws every claim's effect and interval per task against its null, grouped by "
               "paper, the verdict as marker colour. docs/reference.md#claims defines each claim."),
    "report": ("Report", "The run's report", "The run's report",
               "report.html: the claims matrix (claims down, tasks across, the verdict and the effect with its "
               "interval in each cell), the forest plot, the full ledger, then every table and figure of the run by "
               "paper and section, and the run's configuration; one self-contained page."),
}


def _rst(text: str) -> str:
    """Plain text as RST: the characters RST gives a meaning to escaped."""
    return re.sub(r"([\\`*_|<>\[\]])", r"\\\1", text)


def caption_text(title: str, paragraphs: list[tuple[str, str]]) -> str:
    """An RST caption: its title in bold, then each (label, text) as a paragraph; kept from Jinja (``raw``)."""
    body = "\n\n".join(f"**{_rst(label)}** {_rst(text)}" if label else _rst(text) for label, text in paragraphs)
    return "{% raw %}\n" + f"**{_rst(title)}**\n\n{body}\n" + "{% endraw %}\n"


def section_caption(section: Section) -> str:
    """A report section's caption: its title, what it measures and what the paper found."""
    return caption_text(section.title, [("What it measures.", section.measures),
                                        ("What the paper found.", section.finding)])


def caption_files() -> dict[str, str]:
    """Every caption file: path relative to the workflow's directory -> its text (one per report section and one
    per :data:`OTHERS`)."""
    out = {f"{CAPTIONS}/{s.key}.rst": section_caption(s) for s in REGISTRY.report_sections()}
    for name, (_, _, title, text) in OTHERS.items():
        out[f"{CAPTIONS}/{name}.rst"] = caption_text(title, [("", text)])
    return out


def write_captions(root: str | Path) -> list[Path]:
    """Write :func:`caption_files` under the workflow's directory `root`; returns the paths written."""
    written = []
    for rel, text in caption_files().items():
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


def report_flags(name: str) -> dict[str, str]:
    """The ``report()`` arguments of an output: a figure's name without its task (``cosine``, ``parser-syntax``),
    ``table1``, or one of :data:`OTHERS`: caption (relative to the workflow's directory), category (the paper),
    subcategory (the section's title). A figure no section claims is category ``Other figures``."""
    if name in OTHERS:
        category, subcategory, _, _ = OTHERS[name]
        return {"caption": f"{CAPTIONS}/{name}.rst", "category": category, "subcategory": subcategory}
    section = REGISTRY.figure_section(name)
    if section is None:
        return {"caption": "", "category": "Other figures", "subcategory": name}
    return {"caption": f"{CAPTIONS}/{section.key}.rst", "category": section.paper or "Other",
            "subcategory": section.title}


if __name__ == "__main__":  # pragma: no cover - python -m bertology.report.native [ROOT]
    import sys

    for p in write_captions(sys.argv[1] if len(sys.argv) > 1 else "."):
        print(p)
