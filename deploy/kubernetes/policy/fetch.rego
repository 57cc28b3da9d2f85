# Fetch decision: the token is already verified (signature, expiry, method);
# this adds what a security team decides.
package spillway.fetch

default allow := false

allow if {
	not expired
	tenant_matches
}

expired if {
	input.artifact.expires > 0
	input.now >= input.artifact.expires
}

# A link bound to a tenant only opens that tenant's artifacts. MCP reads
# carry no token: Spillway checked the session's tenant already.
tenant_matches if not input.token

tenant_matches if input.token.tenant == ""

tenant_matches if input.token.tenant == input.artifact.tenant

reason := "artifact expired" if expired

reason := "tenant mismatch" if {
	not expired
	not tenant_matches
}
