# Offload decision of the Spillway policy shipped in deploy/kubernetes
# (ConfigMap spillway-policy, replacing the built-in policy). Inputs and
# outputs are the types of package policy (policy/types.go). Edit, run
# `opa test deploy/kubernetes/policy`, then `kubectl apply -k deploy/kubernetes`:
# running replicas reload it.
package spillway.offload

# Text stays inline up to 64 KiB; binary content (images, audio, blobs) up to 16 KiB.
threshold := 65536 if input.kind == "text"

threshold := 16384 if input.kind != "text"

default offload := false

offload if input.size > threshold

# Chosen by the proxy so that a tools/call result fits --result-budget.
offload if input.over_budget

# Links to offloaded outputs live 15 minutes.
ttl_seconds := 900

reason := sprintf("%s of %d bytes is over %d", [input.kind, input.size, threshold]) if input.size > threshold
