package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
)

// A link is revoked by its token id, which every resource_link carries, by
// the tenant that owns the artifact; the artifact's other links live on.
func TestRevokeRoute(t *testing.T) {
	f := newAPIFixture(t)
	base := f.url + "/v1/artifacts"
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789"
	upload := func() artifact.ResourceLink {
		t.Helper()
		resp, b := call(t, "POST", base, alice, strings.NewReader("secret"), nil)
		var l artifact.ResourceLink
		if resp.StatusCode != 201 || json.Unmarshal(b, &l) != nil {
			t.Fatalf("upload = %d %s", resp.StatusCode, b)
		}
		return l
	}
	l := upload()
	id, _ := artifact.IDFromURI(l.URI)
	tokenID, _ := l.Meta[artifact.MetaTokenID].(string)
	if tokenID == "" || !strings.Contains(l.HTTPURL, "t=") {
		t.Fatalf("resource_link without its token id: %+v", l)
	}
	resp, b := call(t, "POST", base+"/"+id+"/links", alice, nil, nil)
	var other artifact.ResourceLink
	if resp.StatusCode != 201 || json.Unmarshal(b, &other) != nil {
		t.Fatalf("mint = %d %s", resp.StatusCode, b)
	}

	if resp, b := call(t, "DELETE", base+"/"+id+"/links/"+tokenID, bob, nil, nil); resp.StatusCode != 404 {
		t.Fatalf("bob revokes alice's link = %d %s", resp.StatusCode, b)
	}
	if resp, _ := get(t, "GET", l.HTTPURL, nil); resp.StatusCode != 200 {
		t.Fatalf("after bob's attempt = %d", resp.StatusCode)
	}
	if resp, b := call(t, "DELETE", base+"/"+id+"/links/"+tokenID, alice, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("revoke = %d %s", resp.StatusCode, b)
	}
	if resp, b := get(t, "GET", l.HTTPURL, nil); resp.StatusCode != 403 || errCode(t, b) != "forbidden" {
		t.Fatalf("revoked link = %d %s", resp.StatusCode, b)
	}
	if resp, _ := get(t, "GET", other.HTTPURL, nil); resp.StatusCode != 200 {
		t.Fatalf("the artifact's other link = %d", resp.StatusCode)
	}
	if resp, b := call(t, "DELETE", base+"/"+id+"/links/not.an.id", alice, nil, nil); resp.StatusCode != 400 {
		t.Fatalf("malformed token id = %d %s", resp.StatusCode, b)
	}
}
