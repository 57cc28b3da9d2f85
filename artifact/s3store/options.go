package s3store

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// Options locate a bucket and tune the store. The zero value of each
// optional field takes the default in brackets.
type Options struct {
	Endpoint     string // host or host:port of the S3 API, without scheme; required
	Bucket       string // required
	Prefix       string // key prefix; "" or ending in "/" (New adds a missing "/") [""]
	AccessKey    string // "" with SecretKey "": anonymous requests
	SecretKey    string
	SessionToken string // for temporary credentials [""]
	Secure       bool   // HTTPS to the endpoint
	Region       string // [asked of the service]
	// PartSize is the multipart part size, MinPartSize to MaxPartSize. It
	// bounds Put's memory (one part buffer per call) and is the largest
	// artifact uploaded with a single PUT; an artifact has at most 10,000
	// parts [DefaultPartSize, 5 MiB: artifacts up to 48 GiB].
	PartSize int64
	// MaxPuts and MaxPutsPerTenant bound the Puts in flight, each holding
	// up to PartSize bytes: in the process and per tenant (Artifact.Tenant).
	// A Put past either waits up to PutWait for one to end, then fails with
	// artifact.ErrBusy (503 with Retry-After). Upload memory is thus at
	// most MaxPuts × PartSize [DefaultMaxPuts, 16; DefaultMaxPutsPerTenant, 4].
	MaxPuts, MaxPutsPerTenant int
	// PutWait is how long a Put waits for a slot [DefaultPutWait, 2s].
	PutWait time.Duration
	// CreateBucket makes New create a missing bucket.
	CreateBucket bool
	// LifecycleDays, when positive, makes New install a bucket lifecycle
	// rule that deletes objects under Prefix that many days after creation
	// (and abandoned multipart uploads after one day): a backstop to the
	// sweeper. Keep it longer than the longest artifact TTL. [0: off]
	LifecycleDays int
	// Timeout bounds how long the service may take to start answering a
	// request: connecting, then the response headers once the request is
	// sent. Stat, Delete, Ping, Revoke, PresignGet, Open until its body
	// starts and each page of ListExpired and Revocations fail with
	// ErrUnavailable after it, retries included; an upload's request that
	// times out fails its Put at once. At most MaxTimeout. [DefaultTimeout, 5s]
	Timeout time.Duration
	// IdleTimeout aborts a transfer that makes no progress for this long:
	// a download body with a read pending (Open's reader then fails with
	// ErrUnavailable) or an upload the service stops accepting. It is not
	// a total deadline: a slow transfer that keeps moving is never cut.
	// At most MaxTimeout. [DefaultIdleTimeout, 15s]
	IdleTimeout time.Duration
}

// MaxTimeout is the largest Timeout and IdleTimeout.
const MaxTimeout = 10 * time.Minute

// check validates o and normalizes Prefix.
func (o *Options) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("s3store: "+format+": %w", append(args, artifact.ErrInvalid)...)
	}
	if err := checkEndpoint(o.Endpoint); err != nil {
		return bad("%v", err)
	}
	if err := checkBucket(o.Bucket); err != nil {
		return bad("bucket %q: %v", o.Bucket, err)
	}
	if o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if err := checkPrefix(o.Prefix); err != nil {
		return bad("%v", err)
	}
	if o.PartSize != 0 && (o.PartSize < MinPartSize || o.PartSize > MaxPartSize) {
		return bad("part size %d not within %d-%d", o.PartSize, MinPartSize, MaxPartSize)
	}
	if o.LifecycleDays < 0 {
		return bad("negative lifecycle days")
	}
	if o.MaxPuts < 0 || o.MaxPutsPerTenant < 0 || o.PutWait < 0 {
		return bad("negative upload bound")
	}
	if o.Timeout < 0 || o.Timeout > MaxTimeout || o.IdleTimeout < 0 || o.IdleTimeout > MaxTimeout {
		return bad("timeouts must be within 0-%v", MaxTimeout)
	}
	return nil
}

func checkEndpoint(e string) error {
	if e == "" {
		return fmt.Errorf("endpoint missing")
	}
	if strings.ContainsAny(e, "/?#@ \\") || strings.ContainsFunc(e, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return fmt.Errorf("endpoint %q: want HOST or HOST:PORT, no scheme or path", e)
	}
	host := e
	if h, port, err := net.SplitHostPort(e); err == nil {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return fmt.Errorf("endpoint %q: bad port", e)
		}
		host = h
	} else if strings.Contains(e, ":") && !strings.HasPrefix(e, "[") {
		return fmt.Errorf("endpoint %q: want HOST or HOST:PORT", e)
	}
	if host == "" {
		return fmt.Errorf("endpoint %q: empty host", e)
	}
	return nil
}

// checkPrefix accepts "" or non-empty path segments each ending in "/",
// printable ASCII or UTF-8 without control characters, no "." or "..".
func checkPrefix(p string) error {
	if p == "" {
		return nil
	}
	if len(p) > 512 {
		return fmt.Errorf("prefix longer than 512 bytes")
	}
	for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("prefix %q: empty, . or .. segment", p)
		}
	}
	if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' || r == 0xfffd }) {
		return fmt.Errorf("prefix %q: control or invalid characters", p)
	}
	return nil
}

// ParseURL parses a store URL:
//
//	s3://BUCKET[/PREFIX]?endpoint=HOST[:PORT][&secure=false][&region=R][&create=true][&lifecycle-days=N][&part-size=SIZE][&max-puts=N][&max-puts-per-tenant=N][&timeout=D][&idle-timeout=D]
//
// endpoint is required; secure defaults to true; region defaults to
// AWS_REGION; SIZE is bytes or a number with KiB, MiB or GiB; D is a Go
// duration such as 5s (Options.Timeout, Options.IdleTimeout). Credentials
// never come from the URL (user info is refused) but from
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. Unknown
// or repeated parameters are errors. Errors wrap artifact.ErrInvalid.
func ParseURL(s string) (Options, error) { return parseURL(s, os.Getenv) }

func parseURL(s string, getenv func(string) string) (Options, error) {
	u, err := parseStoreURL(s)
	if err != nil {
		return Options{}, err
	}
	o := Options{
		Bucket:       u.Host,
		Secure:       true,
		Region:       getenv("AWS_REGION"),
		AccessKey:    getenv("AWS_ACCESS_KEY_ID"),
		SecretKey:    getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: getenv("AWS_SESSION_TOKEN"),
	}
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		o.Prefix = strings.TrimSuffix(p, "/") + "/"
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Options{}, badURL("query: %v", err)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return Options{}, badURL("parameter %q given %d times", k, len(vs))
		}
		if err := o.setParam(k, vs[0]); err != nil {
			return Options{}, err
		}
	}
	if strings.ContainsFunc(o.Region, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		return Options{}, badURL("region %q", o.Region)
	}
	if o.Endpoint == "" {
		return Options{}, badURL("the endpoint parameter is required (e.g. endpoint=127.0.0.1:9000&secure=false)")
	}
	if err := o.check(); err != nil {
		return Options{}, err
	}
	return o, nil
}

// badURL is the error of a store URL ParseURL refuses; it wraps
// artifact.ErrInvalid.
func badURL(format string, args ...any) error {
	return fmt.Errorf("s3store: store URL: "+format+": %w", append(args, artifact.ErrInvalid)...)
}

// parseStoreURL parses s and refuses what no store URL may hold: another
// scheme, no bucket, credentials (they come from the environment only),
// a fragment.
func parseStoreURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, badURL("%v", err)
	}
	if u.Scheme != "s3" || u.Opaque != "" || u.Host == "" {
		return nil, badURL("want s3://BUCKET[/PREFIX]?endpoint=HOST:PORT")
	}
	if u.User != nil {
		return nil, badURL("credentials in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead")
	}
	if u.Fragment != "" || u.RawFragment != "" || strings.Contains(s, "#") {
		return nil, badURL("unexpected fragment")
	}
	return u, nil
}

// setParam sets the option that query parameter k of a store URL names
// to v, or says why v is not a value for it.
func (o *Options) setParam(k, v string) error {
	switch k {
	case "endpoint":
		o.Endpoint = v
	case "secure":
		return boolParam(k, v, &o.Secure)
	case "create":
		return boolParam(k, v, &o.CreateBucket)
	case "region":
		if v != "" { // empty: as if absent, AWS_REGION applies
			o.Region = v
		}
	case "lifecycle-days":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 36500 {
			return badURL("lifecycle-days=%q: want a whole number of days", v)
		}
		o.LifecycleDays = n
	case "max-puts":
		return countParam(k, v, &o.MaxPuts)
	case "max-puts-per-tenant":
		return countParam(k, v, &o.MaxPutsPerTenant)
	case "part-size":
		n, err := parseSize(v)
		if err != nil {
			return badURL("part-size=%q: %v", v, err)
		}
		o.PartSize = n
	case "timeout":
		return timeoutParam(k, v, &o.Timeout)
	case "idle-timeout":
		return timeoutParam(k, v, &o.IdleTimeout)
	default:
		return badURL("unknown parameter %q", k)
	}
	return nil
}

// boolParam sets *dst to v, true or false.
func boolParam(k, v string, dst *bool) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return badURL("%s=%q: want true or false", k, v)
	}
	*dst = b
	return nil
}

// countParam sets *dst to v, a whole number from 1 to 100000.
func countParam(k, v string, dst *int) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100000 {
		return badURL("%s=%q: want a positive whole number", k, v)
	}
	*dst = n
	return nil
}

// timeoutParam sets *dst to v, a positive duration up to MaxTimeout.
func timeoutParam(k, v string, dst *time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > MaxTimeout {
		return badURL("%s=%q: want a duration such as 5s, up to %v", k, v, MaxTimeout)
	}
	*dst = d
	return nil
}

func parseSize(v string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.m
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > MaxPartSize/mult {
		return 0, fmt.Errorf("want a size in bytes, KiB, MiB or GiB up to 5GiB")
	}
	return n * mult, nil
}

// String returns o as a store URL that ParseURL reads back, without the
// credentials: safe to log.
func (o Options) String() string {
	u := url.URL{Scheme: "s3", Host: o.Bucket, Path: "/" + o.Prefix}
	q := url.Values{}
	q.Set("endpoint", o.Endpoint)
	if !o.Secure {
		q.Set("secure", "false")
	}
	if o.Region != "" {
		q.Set("region", o.Region)
	}
	if o.CreateBucket {
		q.Set("create", "true")
	}
	if o.LifecycleDays > 0 {
		q.Set("lifecycle-days", strconv.Itoa(o.LifecycleDays))
	}
	if o.PartSize > 0 {
		q.Set("part-size", strconv.FormatInt(o.PartSize, 10))
	}
	if o.MaxPuts > 0 {
		q.Set("max-puts", strconv.Itoa(o.MaxPuts))
	}
	if o.MaxPutsPerTenant > 0 {
		q.Set("max-puts-per-tenant", strconv.Itoa(o.MaxPutsPerTenant))
	}
	if o.Timeout > 0 {
		q.Set("timeout", o.Timeout.String())
	}
	if o.IdleTimeout > 0 {
		q.Set("idle-timeout", o.IdleTimeout.String())
	}
	u.RawQuery = q.Encode()
	return u.String()
}
