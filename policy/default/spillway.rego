# Spillway's built-in policy. Replace it wholesale with --policy DIR.
package spillway

# Bytes above which content is offloaded, by content kind.
thresholds := {"text": 16384, "image": 4096, "audio": 4096, "resource": 16384, "structured": 16384}

# Longest link lifetime, in seconds.
max_ttl := 3600

default offload := {"offload": false}

# The proxy's configured threshold wins over this table.
threshold := input.threshold if input.threshold > 0

else := thresholds[input.kind]

offload := {"offload": true, "threshold": threshold, "ttl_seconds": 900} if move

# Over its kind's threshold, or chosen to make the result fit its budget
# (--result-budget: what a tools/call result keeps inline).
move if input.size > threshold

move if input.over_budget

default mint := {"allow": true, "max_ttl_seconds": 3600}

# Asked before any bytes leave, whatever the way (input.via). Links are
# asked only after the token verified; this checks what it asserts. MCP
# reads carry no token: their session was authenticated and the tenant
# checked before the policy is asked.
default fetch := {"allow": false, "reason": "the link does not allow this request"}

# Redirect (a presigned storage URL) is allowed: it still happens only where
# the operator enabled --redirect, or in resources/stream's redirect mode.
# A storage URL gives up the link's client-address binding and revocation;
# a stricter policy refuses it for CIDR-bound links.
fetch := {"allow": true, "redirect": true} if {
	method_allowed
	tenant_matches
}

method_allowed if not input.token

method_allowed if input.token.method == "GET"

method_allowed if {
	input.token.method == "HEAD"
	input.request.method == "HEAD"
}

tenant_matches if not input.token.tenant

tenant_matches if input.token.tenant == input.artifact.tenant

# Asked before a request reaches an upstream on a client's behalf (a
# tools/call, prompts/get or resources/read) and, with input.listing, for
# each tool of a tools/list. The built-in policy allows every call; see
# examples/policies/gateway for tools per tenant and rules on arguments.
default call := {"allow": true}
