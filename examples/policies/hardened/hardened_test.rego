package spillway_test

import data.spillway

get(token_tenant, artifact) := {
	"request": {"method": "GET", "path": ["a", "x"], "headers": {}, "source_address": "10.88.1.2"},
	"token": {"method": "GET", "tenant": token_tenant},
	"artifact": artifact,
}

csv := {"id": "x", "mime_type": "text/csv", "size": 100, "tenant": "acme"}

# ---- tenant isolation ----

test_own_tenant_fetches if spillway.fetch.allow with input as get("acme", csv)

test_other_tenant_denied if {
	d := spillway.fetch with input as get("globex", csv)
	not d.allow
	contains(d.reason, "another tenant")
}

test_tenantless_token_denied if not spillway.fetch.allow with input as {
	"via": "link", "request": {"method": "GET"}, "token": {"method": "GET"}, "artifact": csv,
}

# MCP reads carry no token: Spillway checked the session's tenant against
# the artifact's before asking. The tenant rules must not refuse them.
test_mcp_read_allowed if spillway.fetch.allow with input as {
	"via": "resources/read", "request": {"method": "GET"}, "artifact": csv,
}

test_mcp_stream_allowed if spillway.fetch.allow with input as {
	"via": "resources/stream", "request": {"method": "GET"}, "artifact": csv,
}

test_mint_for_other_tenant_denied if not spillway.mint.allow with input as {
	"tenant": "globex", "artifact": csv, "source": "api", "requested_ttl_seconds": 60,
}

# ---- sandbox network binding ----

test_mint_binds_sandbox_cidr if {
	d := spillway.mint with input as {"tenant": "acme", "artifact": csv, "source": "offload", "requested_ttl_seconds": 60}
	d.allow
	d.require_cidr == "10.88.0.0/16"
	d.max_ttl_seconds == 3600
}

test_no_binding_when_unset if {
	d := spillway.mint with input as {"tenant": "acme", "artifact": csv} with data.spillway_config.sandbox_cidr as ""
	d.allow
	not d.require_cidr
}

test_mint_narrower_cidr_allowed if spillway.mint.allow with input as {
	"tenant": "acme", "artifact": csv, "cidr": "10.88.1.2/32",
}

test_mint_outside_cidr_denied if {
	d := spillway.mint with input as {"tenant": "acme", "artifact": csv, "cidr": "192.168.1.2/32"}
	not d.allow
	contains(d.reason, "not inside 10.88.0.0/16")
}

test_mint_wider_cidr_denied if not spillway.mint.allow with input as {
	"tenant": "acme", "artifact": csv, "cidr": "10.0.0.0/8",
}

# ---- per-tenant size caps ----

test_free_tenant_capped if not spillway.mint.allow with input as {
	"tenant": "free", "artifact": object.union(csv, {"tenant": "free", "size": 20000000}),
}

test_enterprise_not_capped if spillway.mint.allow with input as {
	"tenant": "enterprise", "artifact": object.union(csv, {"tenant": "enterprise", "size": 20000000}),
}

test_offload_over_cap_stays_inline if not spillway.offload.offload with input as {
	"tool": "query", "kind": "text", "size": 20000000, "tenant": "free",
}

# ---- per-tool TTL caps, secrets_* never offloaded ----

test_query_ttl_capped if {
	d := spillway.offload with input as {"tool": "query", "kind": "text", "size": 50000, "tenant": "acme"}
	d.offload
	d.ttl_seconds == 300
}

test_default_ttl if {
	d := spillway.offload with input as {"tool": "other", "kind": "text", "size": 50000, "tenant": "acme"}
	d.ttl_seconds == 900
}

test_secrets_never_offloaded if {
	d := spillway.offload with input as {"tool": "secrets_dump", "kind": "text", "size": 50000, "tenant": "acme"}
	not d.offload
	contains(d.reason, "secrets_")
}

test_small_stays_inline if not spillway.offload.offload with input as {"tool": "query", "kind": "text", "size": 100}

# ---- active content ----

test_html_denied if not spillway.fetch.allow with input as get("acme", object.union(csv, {"mime_type": "text/html; charset=utf-8"}))

test_svg_denied if not spillway.fetch.allow with input as get("acme", object.union(csv, {"mime_type": "image/svg+xml"}))

test_png_allowed if spillway.fetch.allow with input as get("acme", object.union(csv, {"mime_type": "image/png"}))

test_html_not_offloaded if not spillway.offload.offload with input as {"tool": "page", "kind": "text", "mime_type": "text/html", "size": 50000}

# ---- method class ----

test_head_token_cannot_get if not spillway.fetch.allow with input as {
	"request": {"method": "GET"}, "token": {"method": "HEAD", "tenant": "acme"}, "artifact": csv,
}
