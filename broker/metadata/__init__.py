"""Cluster metadata: records, the immutable image they build, and the log that holds them."""
