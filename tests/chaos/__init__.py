"""Jepsen-style fault tests of partition replication on a real multi-process cluster."""
