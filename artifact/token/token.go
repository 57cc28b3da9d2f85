// Package token is Spillway's link token format and its signing keys: a
// versioned, canonical payload MAC-bound with HMAC-SHA256 to one artifact id,
// and the key file that holds the secrets. It imports only the standard
// library so that it can be read, fuzzed and audited on its own.
//
// The artifact id is opaque here: any non-empty printable string is bound
// through the MAC. The caller checks that an id has the shape it expects.
package token

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Token errors. The fetch handler maps every one but ErrExpired to the
// same 403 so that a prober learns nothing about what was wrong.
var (
	// ErrInvalid is returned for a malformed, tampered, unknown-key or
	// wrong-artifact token, or one used outside its bindings.
	ErrInvalid = errors.New("token: invalid token")
	// ErrExpired is returned for a genuine token whose expiry has passed.
	ErrExpired = errors.New("token: token expired")
	// ErrBadClaims is returned by Mint for claims that cannot be signed.
	ErrBadClaims = errors.New("token: bad claims")
)

// Method is the class of HTTP methods a token allows. The zero Method
// allows none, and Mint refuses it.
type Method byte

const (
	// MethodGet allows GET and HEAD.
	MethodGet Method = 'G'
	// MethodHead allows HEAD only (size and checksum, not the bytes).
	MethodHead Method = 'H'
)

// Allows reports whether an HTTP method is within m.
func (m Method) Allows(httpMethod string) bool {
	switch httpMethod {
	case "HEAD":
		return m == MethodGet || m == MethodHead
	case "GET":
		return m == MethodGet
	}
	return false
}

// Claims are what a token asserts. Every field is covered by the MAC.
type Claims struct {
	KeyID     string       // key that signed it
	Artifact  string       // artifact id (bound through the MAC, not carried)
	Method    Method       // MethodGet or MethodHead
	NotBefore time.Time    // second precision
	Expires   time.Time    // second precision
	CIDR      netip.Prefix // client address binding; zero means none
	Tenant    string       // the artifact's tenant must equal it; "" means none
	// Audience is a free-form label for the fetch policy; "" means none.
	// It is signed but binds nothing: a fetcher presents only the link,
	// so nothing proves who it is.
	Audience string
	ID       string // token id (ValidID), for logs and revocation
}

// Key is one HMAC-SHA256 key.
type Key struct {
	ID     string // non-empty, at most 256 bytes, no control character
	Secret []byte // at least 32 bytes
}

// Signer mints tokens with one key and verifies them with any of several, so
// keys rotate without downtime: add the new key for verification everywhere,
// then switch signing, then drop the old key. SetKeys swaps the keys of a
// running Signer (WatchKeyFile calls it when the key file changes). Safe for
// concurrent use; the zero value is not usable (use NewSigner).
type Signer struct {
	keys atomic.Pointer[keySet]
	// Leeway is the clock skew tolerated on NotBefore. Expires gets none:
	// it is the httpUrlExpiresAt the holder was promised, and a replica
	// whose clock runs behind must not stretch it. Set it before first use.
	Leeway time.Duration
}

// keySet is immutable once built: a swap replaces it whole, so a token is
// always checked against one consistent set.
type keySet struct {
	signing Key
	verify  map[string]*macKey // by key id, the signing key included
}

// macKey holds a secret and a pool of HMACs already keyed with it, because
// keying an HMAC costs two SHA-256 blocks and five allocations, a third of
// a Verify.
type macKey struct {
	secret []byte
	hmacs  sync.Pool // of hash.Hash keyed with secret, reset
}

func newMACKey(secret []byte) *macKey {
	k := &macKey{secret: secret}
	k.hmacs.New = func() any { return hmac.New(sha256.New, secret) }
	return k
}

// DefaultLeeway is the clock skew NewSigner tolerates on not-before; change
// Signer.Leeway for another.
const DefaultLeeway = 5 * time.Second

// NewSigner returns a Signer that signs with signing and verifies with
// signing plus every key in verify. It fails for an empty or malformed key
// id, a secret shorter than 32 bytes, or one id given two secrets.
func NewSigner(signing Key, verify ...Key) (*Signer, error) {
	s := &Signer{Leeway: DefaultLeeway}
	if err := s.SetKeys(signing, verify...); err != nil {
		return nil, err
	}
	return s, nil
}

// SetKeys replaces the keys, with NewSigner's checks; on error the old keys
// stay. It may run while other goroutines call Mint and Verify: each call
// uses either the old keys or the new ones, never a mix. From its return
// on, tokens of a key no longer listed fail to verify.
func (s *Signer) SetKeys(signing Key, verify ...Key) error {
	ks := &keySet{signing: signing, verify: map[string]*macKey{}}
	for _, k := range append([]Key{signing}, verify...) {
		if !ValidField(k.ID) || k.ID == "" {
			return fmt.Errorf("token: bad key id %q", k.ID)
		}
		if len(k.Secret) < 32 {
			return fmt.Errorf("token: key %q: secret shorter than 32 bytes", k.ID)
		}
		if old, dup := ks.verify[k.ID]; dup && !bytes.Equal(old.secret, k.Secret) {
			return fmt.Errorf("token: key id %q given twice with different secrets", k.ID)
		}
		ks.verify[k.ID] = newMACKey(k.Secret)
	}
	s.keys.Store(ks)
	return nil
}

// SigningKeyID returns the id of the key new tokens are signed with.
func (s *Signer) SigningKeyID() string { return s.keys.Load().signing.ID }

const (
	tokenVersion = "s1"
	macContext   = "spillway-url-token\n"
	fieldCount   = 9
)

// Mint returns a token for c, signed with the signing key. KeyID and, when
// empty, ID are filled in (see NewID); Artifact must be non-empty. Claims
// that cannot be signed yield ErrBadClaims.
func (s *Signer) Mint(c Claims) (string, error) {
	if c.Artifact == "" || !ValidField(c.Artifact) {
		return "", fmt.Errorf("mint: %w: artifact id", ErrBadClaims)
	}
	if c.Method != MethodGet && c.Method != MethodHead {
		return "", fmt.Errorf("mint: %w: method %q", ErrBadClaims, c.Method)
	}
	if !ValidField(c.Tenant) || !ValidField(c.Audience) {
		return "", fmt.Errorf("mint: %w: tenant or audience has a control character", ErrBadClaims)
	}
	if !c.Expires.After(c.NotBefore) {
		return "", fmt.Errorf("mint: %w: expiry not after not-before", ErrBadClaims)
	}
	ks := s.keys.Load()
	c.KeyID = ks.signing.ID
	if c.ID == "" {
		c.ID = NewID()
	}
	if !ValidID(c.ID) {
		return "", fmt.Errorf("mint: %w: token id %q", ErrBadClaims, c.ID)
	}
	cidr := ""
	if c.CIDR.IsValid() {
		cidr = c.CIDR.Masked().String()
	}
	payload := strings.Join([]string{
		tokenVersion, c.KeyID, string(c.Method),
		strconv.FormatInt(c.NotBefore.Unix(), 10), strconv.FormatInt(c.Expires.Unix(), 10),
		cidr, c.Tenant, c.Audience, c.ID,
	}, "\n")
	mac := ks.verify[ks.signing.ID].sum(c.Artifact, payload)
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(mac), nil
}

// Verify checks token for artifact id at time now and returns its claims. It
// returns ErrInvalid for anything but a genuine token for id within its
// time window, and ErrExpired for a genuine token past its expiry; with
// ErrExpired it still returns the claims, for the caller's log. Bindings
// other than time (CIDR, tenant, method) are the caller's to check with
// the returned Claims.
func (s *Signer) Verify(token, id string, now time.Time) (Claims, error) {
	c, payload, mac, err := parseToken(token)
	if err != nil {
		return Claims{}, err
	}
	key, ok := s.keys.Load().verify[c.KeyID]
	if !ok || id == "" || !ValidField(id) {
		return Claims{}, ErrInvalid
	}
	if !hmac.Equal(mac, key.sum(id, payload)) {
		return Claims{}, ErrInvalid
	}
	c.Artifact = id
	if now.Add(s.Leeway).Before(c.NotBefore) {
		return Claims{}, ErrInvalid
	}
	if !now.Before(c.Expires) {
		return c, ErrExpired
	}
	return c, nil
}

// NewID returns a fresh random token id (72 bits, base64url). A caller that
// needs the id of the token it mints sets Claims.ID to one.
func NewID() string {
	var b [9]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ValidID reports whether id can be a token id: 1 to 64 characters of the
// base64url alphabet. Ids are what revocation names, so they are kept to
// a shape that is safe in a file name or an object key.
func ValidID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// sum is the MAC of a token's payload for artifact id.
func (k *macKey) sum(id, payload string) []byte {
	h := k.hmacs.Get().(hash.Hash)
	h.Write([]byte(macContext))
	h.Write([]byte(id))
	h.Write([]byte{'\n'})
	h.Write([]byte(payload))
	mac := h.Sum(nil)
	h.Reset()
	k.hmacs.Put(h)
	return mac
}

var strictB64 = base64.RawURLEncoding.Strict()

// parseToken splits and decodes a token without trusting it: the caller must
// check the MAC before using any claim. Every field has exactly one
// encoding, so a token cannot be re-spelled into another valid token.
func parseToken(token string) (c Claims, payload string, mac []byte, err error) {
	if len(token) > 1024 {
		return c, "", nil, ErrInvalid
	}
	p64, m64, ok := strings.Cut(token, ".")
	if !ok {
		return c, "", nil, ErrInvalid
	}
	pb, err1 := strictB64.DecodeString(p64)
	mac, err2 := strictB64.DecodeString(m64)
	if err1 != nil || err2 != nil || len(mac) != sha256.Size {
		return c, "", nil, ErrInvalid
	}
	payload = string(pb)
	f := strings.Split(payload, "\n")
	if len(f) != fieldCount || f[0] != tokenVersion || f[1] == "" || len(f[2]) != 1 || !ValidID(f[8]) {
		return c, "", nil, ErrInvalid
	}
	c.KeyID, c.Method, c.Tenant, c.Audience, c.ID = f[1], Method(f[2][0]), f[6], f[7], f[8]
	if c.Method != MethodGet && c.Method != MethodHead {
		return c, "", nil, ErrInvalid
	}
	nbf, ok1 := parseUnix(f[3])
	exp, ok2 := parseUnix(f[4])
	if !ok1 || !ok2 {
		return c, "", nil, ErrInvalid
	}
	c.NotBefore, c.Expires = time.Unix(nbf, 0), time.Unix(exp, 0)
	if f[5] != "" {
		p, err := netip.ParsePrefix(f[5])
		if err != nil || p != p.Masked() || p.String() != f[5] {
			return c, "", nil, ErrInvalid
		}
		c.CIDR = p
	}
	for _, s := range f[1:] {
		if !ValidField(s) {
			return c, "", nil, ErrInvalid
		}
	}
	return c, payload, mac, nil
}

// parseUnix accepts only canonical non-negative decimal seconds: 1 to 12
// digits, no leading zero, so that a time has one spelling.
func parseUnix(s string) (int64, bool) {
	if s == "" || len(s) > 12 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// ValidField reports whether s can be carried in a token claim (tenant,
// audience, ids): at most 256 bytes, no control character.
func ValidField(s string) bool {
	if len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}
