# Which tool outputs are offloaded, and for how long their links live.
package spillway

import data.spillway_config as config

# Secrets never leave the conversation as a link anyone with the URL can
# fetch: tools named secrets_* are never offloaded.
offload_deny contains "secrets_* tools are never offloaded" if {
	startswith(input.tool, "secrets_")
}

# Per-tool TTL caps (seconds), the default for the rest.
offload_ttl := min([object.get(config.tool_ttl_seconds, input.tool, config.default_ttl_seconds), config.max_ttl_seconds])
