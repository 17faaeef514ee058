"""Kafka security: listeners, TLS, SASL authentication and SCRAM credentials (authentication), and ACLs with
the StandardAuthorizer model (authorization: broker.security.acl, .authorizer, .acl_control)."""
