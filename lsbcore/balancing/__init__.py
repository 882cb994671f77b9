"""Balancing functions, fixed and learnable, and the LSB learning rule.

The objective, the learning history and the JSON form of a learned function live here too.
"""
