# Active content: HTML, SVG and XML can run script in a browser. The
# fetch endpoint already serves them as attachments in a sandbox; this
# policy refuses them outright.
package spillway

import data.spillway_config as config

active_type(mime) if {
	some t in config.active_types
	startswith(lower(mime), t)
}

fetch_deny contains sprintf("%s is active content", [input.artifact.mime_type]) if {
	active_type(input.artifact.mime_type)
}

offload_deny contains sprintf("%s is active content", [input.mime_type]) if {
	active_type(input.mime_type)
}
