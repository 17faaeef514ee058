"""Who may do what: ACLs and the authorizer (broker.security.acl, .authorizer, .acl_control)."""
