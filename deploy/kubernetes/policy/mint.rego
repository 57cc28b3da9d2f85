# Mint decision: who may have a link to an artifact, and for how long.
package spillway.mint

default allow := false

# Offloads mint links for the tenant whose call produced the output.
allow if input.source == "offload"

# Uploads, re-mints and the CLI: only for the artifact's own tenant.
allow if {
	input.source != "offload"
	input.tenant == input.artifact.tenant
}

# No link outlives an hour, whatever was asked.
max_ttl_seconds := 3600

reason := "artifact belongs to another tenant" if not allow
