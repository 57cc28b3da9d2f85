# Tests of the deploy/kubernetes policy: opa test deploy/kubernetes/policy
package spillway_test

import data.spillway.fetch
import data.spillway.mint
import data.spillway.offload

test_small_text_stays_inline if {
	not offload.offload with input as {"kind": "text", "size": 65536, "method": "tools/call"}
}

test_large_text_is_offloaded if {
	offload.offload with input as {"kind": "text", "size": 65537, "method": "tools/call"}
	offload.ttl_seconds == 900
}

test_image_threshold_is_lower if {
	offload.offload with input as {"kind": "image", "size": 20000, "method": "tools/call"}
	not offload.offload with input as {"kind": "image", "size": 16384, "method": "tools/call"}
}

test_mint_offload if {
	mint.allow with input as {"source": "offload", "tenant": "a", "artifact": {"tenant": "a"}}
	mint.max_ttl_seconds == 3600
}

test_mint_api_same_tenant_only if {
	mint.allow with input as {"source": "api", "tenant": "a", "artifact": {"tenant": "a"}}
	not mint.allow with input as {"source": "api", "tenant": "b", "artifact": {"tenant": "a"}}
	mint.reason == "artifact belongs to another tenant" with input as {"source": "api", "tenant": "b", "artifact": {"tenant": "a"}}
}

fetch_input := {"now": 1000, "token": {"tenant": "a"}, "artifact": {"tenant": "a", "expires": 2000}}

test_fetch_allowed if {
	fetch.allow with input as fetch_input
}

test_fetch_expired_artifact if {
	not fetch.allow with input as object.union(fetch_input, {"now": 2000})
	fetch.reason == "artifact expired" with input as object.union(fetch_input, {"now": 2000})
}

test_fetch_other_tenant if {
	not fetch.allow with input as object.union(fetch_input, {"token": {"tenant": "b"}})
	fetch.reason == "tenant mismatch" with input as object.union(fetch_input, {"token": {"tenant": "b"}})
}

test_fetch_unbound_token if {
	fetch.allow with input as object.union(fetch_input, {"token": {"tenant": ""}})
}

# MCP reads carry no token: Spillway checked the session's tenant already.
test_fetch_mcp_read if {
	data.spillway.fetch.allow with input as {"via": "resources/read", "now": 100, "artifact": {"tenant": "acme", "expires": 0}}
}
