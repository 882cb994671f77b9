"""The samplers: a shared base (state, generator, caches), one module per step rule.

``registry`` lists them all; everything else (factory, comparison, app, CLI) reads it.
"""
