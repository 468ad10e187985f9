"""The attention store's contents: the words of a sample, extraction, the one read of a store."""
