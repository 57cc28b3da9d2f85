# Tenant isolation, per-tenant size caps and the sandbox network binding.
package spillway

import data.spillway_config as config

# A link minted for tenant A never fetches tenant B's artifact, and a
# link without a tenant fetches nothing that belongs to one.
fetch_deny contains "the link belongs to another tenant" if {
	input.token.tenant != input.artifact.tenant
}

fetch_deny contains "the link belongs to another tenant" if {
	input.token
	not input.token.tenant
	input.artifact.tenant
}

# Links are minted only for the artifact's own tenant.
mint_deny contains "the artifact belongs to another tenant" if {
	input.tenant != input.artifact.tenant
}

# Per-tenant size caps (bytes); tenants without one get the default.
size_cap := object.get(config.size_caps, input.tenant, config.default_size_cap)

mint_deny contains sprintf("artifact of %d bytes is over the tenant's cap of %d", [input.artifact.size, size_cap]) if {
	input.artifact.size > size_cap
}

offload_deny contains sprintf("over the tenant's cap of %d bytes", [cap]) if {
	cap := object.get(config.size_caps, input.tenant, config.default_size_cap)
	input.size > cap
}

# Every link is bound to the sandbox network: the fetch endpoint refuses
# any other source address (the binding is signed into the token).
mint_bindings := {"require_cidr": config.sandbox_cidr} if config.sandbox_cidr != ""

mint_bindings := {} if config.sandbox_cidr == ""

# A caller may ask for a narrower network (one sandbox's /32), never one
# outside the sandbox network: refused here with the policy's reason
# before Spillway's own narrowing would refuse it.
mint_deny contains sprintf("the network asked for, %s, is not inside %s", [input.cidr, config.sandbox_cidr]) if {
	config.sandbox_cidr != ""
	input.cidr
	not net.cidr_contains(config.sandbox_cidr, input.cidr)
}
