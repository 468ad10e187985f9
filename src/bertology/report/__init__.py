"""The report: results/report.html and the captions of Snakemake's own report."""
