# A hardened Spillway policy. Each concern lives in its own file and adds
# reasons to the deny sets below; a decision allows only when no file
# objects. Add a file to add a rule.
package spillway

import data.spillway_config as config

# ---- fetch: a sandbox GETs an httpUrl ----

default fetch := {"allow": false, "reason": "denied"}

fetch := {"allow": true} if count(fetch_deny) == 0

fetch := {"allow": false, "reason": concat("; ", sort(fetch_deny))} if count(fetch_deny) > 0

# The token's method class must allow the request's method.
fetch_deny contains "the link is HEAD-only" if {
	input.token.method == "HEAD"
	input.request.method != "HEAD"
}

# ---- offload: a tool result item is over the proxy's threshold ----

default offload := {"offload": false}

offload := {"offload": true, "ttl_seconds": offload_ttl} if {
	count(offload_deny) == 0
	over_threshold_or_budget
}

over_threshold_or_budget if input.size > config.thresholds[input.kind]

# Chosen by the proxy so that a tools/call result fits --result-budget.
over_threshold_or_budget if input.over_budget

offload := {"offload": false, "reason": concat("; ", sort(offload_deny))} if count(offload_deny) > 0

# ---- mint: a link is about to be signed ----

default mint := {"allow": false, "reason": "denied"}

mint := object.union(
	{"allow": true, "max_ttl_seconds": config.max_ttl_seconds},
	mint_bindings,
) if count(mint_deny) == 0

mint := {"allow": false, "reason": concat("; ", sort(mint_deny))} if count(mint_deny) > 0
