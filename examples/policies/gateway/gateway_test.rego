package spillway_test

import data.spillway

tool(tenant, upstream, name, arguments) := {
	"tenant": tenant, "upstream": upstream, "kind": "tool", "name": name,
	"arguments": arguments, "listing": false,
}

listed(tenant, upstream, name) := {"tenant": tenant, "upstream": upstream, "kind": "tool", "name": name, "listing": true}

# ---- read-only tenant (tenants.rego) ----

test_analyst_reads_by_pattern if {
	spillway.call.allow with input as tool("analyst", "files", "read_text_file", {"path": "/srv/a.txt"})
	spillway.call.allow with input as tool("analyst", "files", "list_directory", {"path": "/srv"})
	spillway.call.allow with input as tool("analyst", "tickets", "issue_get", {"id": 7})
	spillway.call.allow with input as tool("analyst", "files", "read_file.v2", {}) # "*" spans dots
}

test_analyst_reads_listed_tool if spillway.call.allow with input as tool("analyst", "files", "directory_tree", {"path": "/srv"})

test_analyst_write_denied if {
	d := spillway.call with input as tool("analyst", "files", "write_file", {"path": "/srv/a.txt", "content": "x"})
	not d.allow
	contains(d.reason, `"write_file" at "files" is not one`)
}

# A tool listed as read-only for one upstream is not for another.
test_analyst_listed_tool_elsewhere_denied if not spillway.call.allow with input as tool("analyst", "other", "directory_tree", {})

# Not listed: the tool is absent from the analyst's tools/list.
test_analyst_write_not_listed if not spillway.call.allow with input as listed("analyst", "files", "write_file")

test_analyst_read_listed if spillway.call.allow with input as listed("analyst", "files", "read_text_file")

# A pattern is a whole-name glob: "get_*" does not match "forget_all".
test_analyst_pattern_whole_name if not spillway.call.allow with input as tool("analyst", "memory", "forget_all", {})

test_other_tenant_writes if {
	spillway.call.allow with input as tool("ops", "files", "write_file", {"path": "/srv/a.txt", "content": "x"})
	spillway.call.allow with input as listed("ops", "files", "write_file")
	spillway.call.allow with input as tool("", "files", "write_file", {})
}

test_analyst_prompts_and_resources if {
	spillway.call.allow with input as {"tenant": "analyst", "upstream": "tickets", "kind": "prompt", "name": "triage", "arguments": {"id": "7"}, "listing": false}
	spillway.call.allow with input as {"tenant": "analyst", "upstream": "files", "kind": "resource", "name": "file:///srv/a.txt", "listing": false}
}

# ---- no DROP in a SQL tool's query (sql.rego) ----

test_sql_select_allowed if {
	spillway.call == {"allow": true} with input as tool("ops", "db", "query", {"query": "SELECT * FROM users"})
	spillway.call.allow with input as tool("ops", "db", "run_sql", {"query": "select drop_date from backdrop"})
}

test_sql_drop_denied if {
	d := spillway.call with input as tool("ops", "db", "query", {"query": "DROP TABLE users"})
	not d.allow
	d.reason == `"query" at "db": DROP is not allowed in "query"`
}

test_sql_drop_any_case_and_place if {
	not spillway.call.allow with input as tool("ops", "db", "run_sql", {"query": "select 1; drop table users"})
	not spillway.call.allow with input as tool("ops", "db", "query", {"query": "SELECT 1;\n\tDrOp TABLE x"})
	not spillway.call.allow with input as tool("ops", "db", "query", {"query": "drop/**/table x"})
}

test_sql_listing_allowed if {
	spillway.call.allow with input as listed("ops", "db", "query")
	spillway.call.allow with input as listed("ops", "db", "run_sql")
}

test_sql_not_a_string_denied if {
	d := spillway.call with input as tool("ops", "db", "query", {"query": ["DROP TABLE users"]})
	not d.allow
	contains(d.reason, "must be a string")
}

test_sql_without_query_denied if {
	not spillway.call.allow with input as tool("ops", "db", "query", {"limit": 10})
	not spillway.call.allow with input as {"tenant": "ops", "upstream": "db", "kind": "tool", "name": "run_sql", "listing": false}
}

# Only the SQL tools named in data.json: another upstream's "query" tool,
# or another argument, is not SQL.
test_sql_other_tool_or_argument if {
	spillway.call.allow with input as tool("ops", "search", "query", {"query": "how to drop a table"})
	spillway.call.allow with input as tool("ops", "db", "query", {"query": "SELECT 1", "comment": "drop it"})
	spillway.call.allow with input as tool("ops", "db", "describe", {"query": "DROP TABLE x"})
}

# Both rules at once: every reason is told.
test_both_rules if {
	d := spillway.call with input as tool("analyst", "db", "run_sql", {"query": "DROP TABLE users"})
	not d.allow
	contains(d.reason, "read-only")
	contains(d.reason, "DROP")
}

# ---- offload, mint, fetch: as the built-in policy ----

test_offload_large_text if spillway.offload.offload with input as {"kind": "text", "size": 20000}

test_keep_small_text if not spillway.offload.offload with input as {"kind": "text", "size": 100}

test_configured_threshold_wins if spillway.offload.offload with input as {"kind": "text", "size": 2000, "threshold": 1024}

test_over_budget_moves if spillway.offload.offload with input as {"kind": "text", "size": 10, "over_budget": true}

test_mint_capped if spillway.mint.max_ttl_seconds == 3600

test_fetch_get if spillway.fetch.allow with input as {"token": {"method": "GET"}, "request": {"method": "GET"}, "artifact": {}}

test_fetch_head if spillway.fetch.allow with input as {"token": {"method": "HEAD"}, "request": {"method": "HEAD"}, "artifact": {}}

test_fetch_head_token_no_get if not spillway.fetch.allow with input as {"token": {"method": "HEAD"}, "request": {"method": "GET"}, "artifact": {}}

test_fetch_mcp_read if spillway.fetch.allow with input as {"via": "resources/read", "request": {"method": "GET"}, "artifact": {"tenant": "a"}}

test_fetch_other_tenant if not spillway.fetch.allow with input as {"token": {"method": "GET", "tenant": "a"}, "request": {"method": "GET"}, "artifact": {"tenant": "b"}}
