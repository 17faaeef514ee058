"""Listeners, TLS, SASL authentication and SCRAM credentials (the authentication half of Kafka security)."""
