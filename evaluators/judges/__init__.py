"""LLM-judge rubrics kept as data, and the pure prompt-building / parsing code around them.

The model calls themselves live in tasks_lib (evaluators never touch the network).
"""
