"""Copyright traps (Meeus et al., "Copyright Traps for Large Language Models", ICML 2024,
arXiv 2402.09363): a publisher generates unique trap sequences, inserts them many times
into documents before publishing, and later tests whether a model memorised them.

One module per step, each registered as a study (`pddkit list`): generate.py (trap
sequences of exact token lengths over a perplexity range), inject.py (member traps
repeated into documents), detect.py (inserted vs held-out traps, AUC per length x
repeats x perplexity bucket); folder.py is the trap folder the three share."""
