package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// A revocation is recorded under the artifact named in the route and
// concerns its links only: a tenant that names another tenant's token id
// under an artifact of its own refuses nothing (the route once checked the
// artifact's owner, then refused the token id everywhere).
func TestRevokeOtherTenantsToken(t *testing.T) {
	f := newAPIFixture(t)
	base := f.url + "/v1/artifacts"
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789"
	upload := func(who string) (string, artifact.ResourceLink) {
		t.Helper()
		resp, b := call(t, "POST", base, who, strings.NewReader("bytes of "+who), nil)
		var l artifact.ResourceLink
		if resp.StatusCode != 201 || json.Unmarshal(b, &l) != nil {
			t.Fatalf("upload = %d %s", resp.StatusCode, b)
		}
		id, _ := artifact.IDFromURI(l.URI)
		return id, l
	}
	_, la := upload(alice)
	bobs, _ := upload(bob)
	tokenID, _ := la.Meta[artifact.MetaTokenID].(string)
	if resp, b := call(t, "DELETE", base+"/"+bobs+"/links/"+tokenID, bob, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("bob names alice's token under his artifact = %d %s, want 204 (nothing tells a token id's existence)", resp.StatusCode, b)
	}
	if resp, b := get(t, "GET", la.HTTPURL, nil); resp.StatusCode != 200 {
		t.Fatalf("alice's link after bob's revocation = %d %s, want 200", resp.StatusCode, b)
	}
}

// Past the bound on an artifact's revocations the route answers 409 with
// a stable code that tells the caller to delete the artifact instead;
// revoking a recorded id again is still no error.
func TestRevokeBound(t *testing.T) {
	f := newAPIFixture(t)
	f.svc.MaxRevocationsPerArtifact = 3
	base := f.url + "/v1/artifacts"
	const alice = "alice-token-0123456789"
	resp, b := call(t, "POST", base, alice, strings.NewReader("secret"), nil)
	var l artifact.ResourceLink
	if resp.StatusCode != 201 || json.Unmarshal(b, &l) != nil {
		t.Fatalf("upload = %d %s", resp.StatusCode, b)
	}
	id, _ := artifact.IDFromURI(l.URI)
	for _, tok := range []string{"t1", "t2", "t3", "t1"} {
		if resp, b := call(t, "DELETE", base+"/"+id+"/links/"+tok, alice, nil, nil); resp.StatusCode != 204 {
			t.Fatalf("revoke %s = %d %s", tok, resp.StatusCode, b)
		}
	}
	resp, b = call(t, "DELETE", base+"/"+id+"/links/t4", alice, nil, nil)
	if resp.StatusCode != 409 || errCode(t, b) != "revocation_limit" || !strings.Contains(string(b), "delete the artifact") {
		t.Fatalf("revoke past the bound = %d %s, want 409 revocation_limit", resp.StatusCode, b)
	}
	// Deleting the artifact takes its revocations along.
	if resp, b := call(t, "DELETE", base+"/"+id, alice, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("delete = %d %s", resp.StatusCode, b)
	}
	n := 0
	f.svc.Store.Revocations(t.Context(), "alice", "", time.Now(), func(artifact.Revocation) error { n++; return nil })
	if n != 0 {
		t.Fatalf("%d revocations left after the artifact was deleted", n)
	}
}
