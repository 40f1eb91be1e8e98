"""tileport's evaluation lab: the wild-set harnesses, the mutation campaign, the interpreter's corpus
runs, fuzzers, corpus drivers and measurement scripts (README.md). Nothing here is installed with
tileport; it runs from the repository root (`python3 -m eval.<module>`)."""
