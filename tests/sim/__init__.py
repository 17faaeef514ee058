"""Deterministic simulation of the Raft quorum (see cluster.py)."""
