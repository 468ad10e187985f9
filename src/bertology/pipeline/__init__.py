"""The workflow's own machinery: the CLI and its entry, config, files and paths, provenance, the job server."""
