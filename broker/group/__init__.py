"""Consumer groups: the classic group coordinator (pure) and its `__consumer_offsets` shell."""
