"""The transaction coordinator (issue 5): state machine in `state`, records in `records`, shell in `service`."""
