"""Statistics shared by the analyses: running moments, the statistics over fine-tuning seeds."""
