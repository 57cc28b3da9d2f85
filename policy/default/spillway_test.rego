package spillway_test

import data.spillway

test_offload_large_text if spillway.offload.offload with input as {"kind": "text", "size": 20000}

test_keep_small_text if not spillway.offload.offload with input as {"kind": "text", "size": 100}

test_fetch_get if spillway.fetch.allow with input as {"token": {"method": "GET"}, "request": {"method": "GET"}, "artifact": {}}

test_fetch_head_token_no_get if not spillway.fetch.allow with input as {"token": {"method": "HEAD"}, "request": {"method": "GET"}, "artifact": {}}

test_fetch_redirect_allowed if spillway.fetch.redirect with input as {"via": "link", "token": {"method": "GET"}, "request": {"method": "GET"}, "artifact": {}}

test_fetch_mcp_read_without_token if spillway.fetch.allow with input as {"via": "resources/read", "request": {"method": "GET"}, "artifact": {"tenant": "a"}}

test_fetch_other_tenant if not spillway.fetch.allow with input as {"token": {"method": "GET", "tenant": "a"}, "request": {"method": "GET"}, "artifact": {"tenant": "b"}}

test_mint_capped if spillway.mint.max_ttl_seconds == 3600

test_configured_threshold_wins if spillway.offload.offload with input as {"kind": "text", "size": 2000, "threshold": 1024}

test_structured_over_budget if spillway.offload.offload with input as {"kind": "structured", "size": 2000, "over_budget": true}

test_over_budget_moves_a_small_item if spillway.offload.offload with input as {"kind": "text", "size": 2000, "over_budget": true}

test_configured_threshold_higher if not spillway.offload.offload with input as {"kind": "text", "size": 20000, "threshold": 65536}

test_call_tool_allowed if spillway.call == {"allow": true} with input as {"tenant": "acme", "upstream": "db", "kind": "tool", "name": "run_sql", "arguments": {"query": "DROP TABLE t"}, "listing": false}

test_call_listing_allowed if spillway.call.allow with input as {"tenant": "", "upstream": "db", "kind": "tool", "name": "run_sql", "listing": true}

test_call_prompt_and_resource_allowed if {
	spillway.call.allow with input as {"tenant": "a", "upstream": "u", "kind": "prompt", "name": "p", "listing": false}
	spillway.call.allow with input as {"tenant": "a", "upstream": "u", "kind": "resource", "name": "file:///etc/hosts", "listing": false}
}
