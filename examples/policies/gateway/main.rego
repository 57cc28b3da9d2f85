# A Spillway policy for a gateway: one Spillway in front of many tool
# servers (upstreams). The call decision says which tenant may call which
# tool of which upstream, with which arguments; each concern is a file
# that adds reasons to call_deny, and a call is allowed only when no file
# objects. Offload, mint and fetch are the built-in policy's
# (policy/default/spillway.rego). Settings are in data.json
# (data.gateway_config).
package spillway

# ---- call: a request is about to reach an upstream, or a tool to be listed ----

default call := {"allow": false, "reason": "denied"}

call := {"allow": true} if count(call_deny) == 0

call := {"allow": false, "reason": concat("; ", sort(call_deny))} if count(call_deny) > 0

# ---- offload, mint, fetch: as the built-in policy ----

thresholds := {"text": 16384, "image": 4096, "audio": 4096, "resource": 16384, "structured": 16384}

default offload := {"offload": false}

offload := {"offload": true, "threshold": threshold, "ttl_seconds": 900} if move

# The proxy's configured threshold wins over the table.
threshold := input.threshold if input.threshold > 0

else := thresholds[input.kind]

move if input.size > threshold

move if input.over_budget

default mint := {"allow": true, "max_ttl_seconds": 3600}

default fetch := {"allow": false, "reason": "the link does not allow this request"}

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
