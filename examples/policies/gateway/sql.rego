# An argument rule: no DROP in a SQL tool's query. The SQL tools are named
# per upstream in sql_tools, and the argument that holds the SQL is
# sql_argument. DROP is refused as a word, in any case ("drop table t",
# "x; DROP TABLE t"), not inside another word ("backdrop", "drop_date").
# This is a guard rail, not a SQL parser: give the upstream a database role
# that cannot drop either.
package spillway

import data.gateway_config as config

# Listing a SQL tool asks about the tool, not a query (there are no
# arguments then): it stays listed, and each call is checked.
sql_call if {
	not input.listing
	input.kind == "tool"
	input.name in object.get(config.sql_tools, input.upstream, [])
}

call_deny contains sprintf("%q at %q: DROP is not allowed in %q", [input.name, input.upstream, config.sql_argument]) if {
	sql_call
	q := input.arguments[config.sql_argument]
	is_string(q)
	regex.match(`(?i)\bdrop\b`, q)
}

# A query that is absent or not a string cannot be checked: refused, not
# let through. (This is why listing is left out above: a listing has no
# arguments.)
call_deny contains sprintf("%q at %q: %q must be a string", [input.name, input.upstream, config.sql_argument]) if {
	sql_call
	not is_string(object.get(object.get(input, "arguments", {}), config.sql_argument, null))
}
