# Read-only tenants: a tenant listed in read_only_tenants may call only the
# tools that read. A tool reads when its name matches one of
# read_tool_patterns (globs over the tool's name at its upstream, without
# the gateway's prefix) or is listed for its upstream in read_tools. A tool
# such a tenant may not call is also left out of its tools/list (the rule
# holds when input.listing is true). Prompts and resource reads are reads:
# this file leaves them alone.
package spillway

import data.gateway_config as config

call_deny contains sprintf("tenant %q may call only read-only tools; %q at %q is not one", [input.tenant, input.name, input.upstream]) if {
	input.tenant in config.read_only_tenants
	input.kind == "tool"
	not read_tool
}

# A null delimiter list: "*" matches any characters, dots included (a tool
# name is one word, not a dotted path).
read_tool if {
	some pattern in config.read_tool_patterns
	glob.match(pattern, null, input.name)
}

read_tool if input.name in object.get(config.read_tools, input.upstream, [])
