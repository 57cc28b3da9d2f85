package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/mux"
	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// What a name resolves in.
const (
	kindTool     = "tool"
	kindPrompt   = "prompt"
	kindResource = "resource"
)

// MetaUnavailable is the _meta key of a merged list that lacks what some
// upstreams would have listed: an array of {upstream, reason,
// retryAfterMs}.
const MetaUnavailable = "io.spillway/unavailable"

// listing describes one of the four lists.
type listing struct {
	field string // the result's array
	kind  string // what its items' names resolve in
	key   string // the member of an item that is its name or URI
}

var listings = map[string]listing{
	"tools/list":               {"tools", kindTool, "name"},
	"prompts/list":             {"prompts", kindPrompt, "name"},
	"resources/list":           {"resources", kindResource, "uri"},
	"resources/templates/list": {"resourceTemplates", kindResource, "uriTemplate"},
}

// maxNames bounds the names a Conn remembers per kind: past it the table
// starts over (a name not remembered is still resolved by its prefix).
const maxNames = 1 << 14

// names maps the names a Conn's client was given to their upstream and
// the upstream's own name, and remembers which upstreams list a name (for
// PrefixCollision). Safe for concurrent use.
type names struct {
	mu     sync.Mutex
	to     map[string]map[string]target   // kind → exposed name → target
	owners map[string]map[string][]string // kind → upstream's name → upstreams listing it
	uriPre map[string]target              // exposed template literal prefix → upstream, its own prefix
}

type target struct{ upstream, name string }

func newNames() names {
	return names{to: map[string]map[string]target{}, owners: map[string]map[string][]string{}, uriPre: map[string]target{}}
}

func (n *names) add(kind, exposed string, t target) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.to[kind]
	if m == nil || len(m) >= maxNames {
		m = map[string]target{}
		n.to[kind] = m
	}
	m[exposed] = t
}

// addTemplate records that URIs starting with exposed (a template's
// literal prefix as the client sees it) are t.upstream's, starting with
// t.name there.
func (n *names) addTemplate(exposed string, t target) {
	if exposed == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.uriPre) >= maxNames {
		n.uriPre = map[string]target{}
	}
	n.uriPre[exposed] = t
}

// lookup resolves an exposed name; for a resource, a URI a template of an
// upstream's produces (longest template prefix wins).
func (n *names) lookup(kind, exposed string) (upstream, name string, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t, found := n.to[kind][exposed]; found {
		return t.upstream, t.name, true
	}
	if kind != kindResource {
		return "", "", false
	}
	best, found := "", false
	var t target
	for pre, tp := range n.uriPre {
		if len(pre) >= len(best) && strings.HasPrefix(exposed, pre) {
			best, t, found = pre, tp, true
		}
	}
	if !found {
		return "", "", false
	}
	return t.upstream, t.name + exposed[len(best):], true
}

// owned records that upstream lists name (of kind) and returns how many
// upstreams do.
func (n *names) owned(kind, name, upstream string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.owners[kind]
	if m == nil || len(m) >= maxNames {
		m = map[string][]string{}
		n.owners[kind] = m
	}
	for _, u := range m[name] {
		if u == upstream {
			return len(m[name])
		}
	}
	m[name] = append(m[name], upstream)
	return len(m[name])
}

// page is one upstream's answer to a list request.
type page struct {
	m      *member
	result []byte
	miss   *Unavailable
}

// list answers one of the four lists: the first page asks every upstream
// for its first page; a cursor the Conn gave names the upstreams with more
// and their own cursors.
func (c *Conn) list(ctx context.Context, req *jsonrpc.Message) {
	ls := listings[req.Method]
	ms, cursors, err := c.listTargets(req)
	if err != nil {
		c.push(jsonrpc.ErrorResponse(req.ID, jsonrpc.CodeInvalidParams, err.Error()))
		return
	}
	pages := make([]page, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() { pages[i] = c.listOne(ctx, m, req.Method, cursors[m.spec.Name]) })
	}
	wg.Wait()
	c.push(jsonrpc.Response(req.ID, c.merge(ctx, ls, pages)))
}

// listTargets returns the upstreams a list request asks and their
// cursors.
func (c *Conn) listTargets(req *jsonrpc.Message) ([]*member, map[string]string, error) {
	all := c.upMembers()
	cur := jsonrpc.StringMember(req.Params, "cursor")
	if cur == "" {
		return all, map[string]string{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cur)
	var cursors map[string]string
	if err == nil {
		err = json.Unmarshal(b, &cursors)
	}
	if err != nil || len(cursors) == 0 {
		return nil, nil, fmt.Errorf("invalid cursor")
	}
	var ms []*member
	for _, m := range all {
		if _, ok := cursors[m.spec.Name]; ok {
			ms = append(ms, m)
		}
	}
	return ms, cursors, nil
}

// listOne asks one upstream for one page.
func (c *Conn) listOne(ctx context.Context, m *member, method, cursor string) page {
	mx := m.current()
	if mx == nil {
		_, _, u := m.live()
		return page{m: m, miss: u}
	}
	params := []byte(`{}`)
	if cursor != "" {
		params = setString(params, cursor, "cursor")
	}
	r, err := ownRequest(ctx, m, mx, method, params)
	if err == nil && r.Error != nil {
		if r.ErrorCode() == jsonrpc.CodeMethodNotFound {
			return page{m: m} // it has none of these
		}
		if transportFailure(r) {
			go m.probe()
		}
		err = fmt.Errorf("%s", jsonrpc.StringMember(r.Error, "message"))
	}
	if err != nil {
		return page{m: m, miss: &Unavailable{Upstream: m.spec.Name, Reason: err.Error(), RetryAfter: time.Second}}
	}
	if method == "tools/list" && m.spec.Learn != nil {
		m.spec.Learn(r.Result)
	}
	return page{m: m, result: r.Result}
}

// maxLearnPages bounds the pages of tools read to learn one tool, and
// learnEvery how often a connection lists an upstream to learn tools it
// does not know: a tool that stays unknown (the client made its name up)
// costs one listing per learnEvery, not one per call.
const (
	maxLearnPages = 20
	learnEvery    = 10 * time.Second
)

// learnTool lists an upstream's tools (every page, up to maxLearnPages)
// when the tool a call names was not learned yet.
func (c *Conn) learnTool(ctx context.Context, m *member, name string) {
	if m.spec.Knows == nil || m.spec.Knows(name) {
		return
	}
	now := time.Now().UnixNano()
	last := m.learned.Load()
	if now-last < int64(learnEvery) || !m.learned.CompareAndSwap(last, now) {
		return
	}
	cursor := ""
	for range maxLearnPages {
		p := c.listOne(ctx, m, "tools/list", cursor)
		if cursor = jsonrpc.StringMember(p.result, "nextCursor"); p.miss != nil || cursor == "" || m.spec.Knows(name) {
			return
		}
	}
}

// ownRequest sends a request of the Conn's own to an upstream and waits
// for its answer, at most the upstream's call timeout (30 s without one).
func ownRequest(ctx context.Context, m *member, mx *mux.Mux, method string, params []byte) (*jsonrpc.Message, error) {
	t := m.spec.CallTimeout
	if t <= 0 {
		t = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	req := jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":"gw","method":` + quote(method) + `,"params":{}}`).WithParams(params)
	return pool.Request(ctx, mx, req)
}

// merge joins the upstreams' pages into one: items given their exposed
// names, tools the upstream's lists or the call decision exclude left
// out, a cursor for the upstreams with more, and the upstreams that could
// not answer in _meta.
func (c *Conn) merge(ctx context.Context, ls listing, pages []page) []byte {
	cursors := map[string]string{}
	var missing []map[string]any
	type listed struct {
		m    *member
		item []byte
	}
	var all []listed
	for _, p := range pages {
		if p.miss != nil {
			missing = append(missing, map[string]any{"upstream": p.miss.Upstream, "reason": p.miss.Reason,
				"retryAfterMs": p.miss.RetryAfter.Milliseconds()})
			continue
		}
		if next := jsonrpc.StringMember(p.result, "nextCursor"); next != "" {
			cursors[p.m.spec.Name] = next
		}
		arr := jsonrpc.RawMember(p.result, ls.field)
		if len(arr) == 0 || arr[0] != '[' {
			continue
		}
		for _, sp := range jsonrpc.Elements(arr, [2]int{0, len(arr)}) {
			item := arr[sp[0]:sp[1]]
			name := jsonrpc.StringMember(item, ls.key)
			if ls.kind == kindTool && name != "" && !c.mayList(ctx, p.m, name) {
				continue // not this client's: it collides with nothing
			}
			all = append(all, listed{p.m, item})
			if ls.kind != kindResource {
				// Every upstream's names first: a collision is known
				// before the first of the two is exposed.
				c.names.owned(ls.kind, name, p.m.spec.Name)
			}
		}
	}
	var items [][]byte
	for _, l := range all {
		if item := c.expose(ctx, ls, l.m, l.item); item != nil {
			items = append(items, item)
		}
	}
	out := []byte(`{"` + ls.field + `":[` + string(joinJSON(items)) + `]}`)
	if len(cursors) > 0 {
		b, _ := json.Marshal(cursors)
		out = setString(out, base64.RawURLEncoding.EncodeToString(b), "nextCursor")
	}
	if len(missing) > 0 {
		b, _ := json.Marshal(missing)
		out, _ = jsonrpc.SetPath(out, b, "_meta", MetaUnavailable)
	}
	return out
}

// expose returns a listed item with its exposed name (or URI), and
// records how to resolve it; nil leaves it out.
func (c *Conn) expose(ctx context.Context, ls listing, m *member, item []byte) []byte {
	name := jsonrpc.StringMember(item, ls.key)
	if name == "" {
		return item
	}
	if ls.kind == kindResource {
		exposed := c.exposeURI(m, name)
		if ls.key == "uriTemplate" {
			c.names.addTemplate(templatePrefix(exposed), target{m.spec.Name, templatePrefix(name)})
		}
		if exposed == name {
			return item
		}
		return setString(item, exposed, ls.key)
	}
	owners := c.names.owned(ls.kind, name, m.spec.Name)
	exposed := name
	switch c.mode() {
	case PrefixAlways:
		exposed = prefixed(m.spec.Name, c.r.o.Separator, name)
	case PrefixCollision:
		if owners > 1 {
			exposed = prefixed(m.spec.Name, c.r.o.Separator, name)
		}
	case PrefixNever:
		if up, _, ok := c.names.lookup(ls.kind, name); ok && up != m.spec.Name && c.member(up) != nil && c.listedBefore(up, m.spec.Name) {
			m.log.Warn("two upstreams have the same "+ls.kind+"; listing the first's", "name", name, "first", up)
			return nil
		}
	}
	if len(exposed) > maxToolName && ls.kind == kindTool {
		m.log.Warn("a prefixed tool name is too long; leaving the tool out", "name", name)
		return nil
	}
	c.names.add(ls.kind, exposed, target{m.spec.Name, name})
	c.r.noteName(ls.kind, exposed, target{m.spec.Name, name})
	if exposed == name {
		return item
	}
	return setString(item, exposed, ls.key)
}

// mayList reports whether this client is shown upstream m's tool name:
// the upstream's allow and deny lists and the call decision let it.
func (c *Conn) mayList(ctx context.Context, m *member, name string) bool {
	return toolAllowed(m.spec.Allow, m.spec.Deny, name) && c.authorize(ctx, m, kindTool, name, nil, true) == nil
}

// listedBefore reports whether upstream a comes before b in the
// configuration.
func (c *Conn) listedBefore(a, b string) bool {
	for _, m := range c.upMembers() {
		switch m.spec.Name {
		case a:
			return true
		case b:
			return false
		}
	}
	return false
}

// exposeURI returns the URI the client is given for an upstream's uri,
// and remembers where it leads.
func (c *Conn) exposeURI(m *member, uri string) string {
	exposed := uri
	if c.mode() == PrefixAlways && !strings.HasPrefix(uri, "spillway://") {
		exposed = prefixURI(m.spec.Name, uri)
	}
	if !strings.Contains(uri, "{") {
		c.names.add(kindResource, exposed, target{m.spec.Name, uri})
		c.r.noteName(kindResource, exposed, target{m.spec.Name, uri})
	}
	return exposed
}

// afterCall rewrites a tools/call result of upstream m: the URIs of the
// resource links and embedded resources it returned become the client's.
func (c *Conn) afterCall(m *member) func(*jsonrpc.Message) *jsonrpc.Message {
	return func(r *jsonrpc.Message) *jsonrpc.Message {
		return rewriteItems(r, "content", func(item []byte) []byte {
			switch jsonrpc.StringMember(item, "type") {
			case "resource_link":
				if uri := jsonrpc.StringMember(item, "uri"); uri != "" {
					return setString(item, c.exposeURI(m, uri), "uri")
				}
			case "resource":
				if uri := stringAt(item, "resource", "uri"); uri != "" {
					return setString(item, c.exposeURI(m, uri), "resource", "uri")
				}
			}
			return item
		})
	}
}

// afterRead rewrites a resources/read result's contents' URIs.
func (c *Conn) afterRead(m *member) func(*jsonrpc.Message) *jsonrpc.Message {
	return func(r *jsonrpc.Message) *jsonrpc.Message {
		return rewriteItems(r, "contents", func(item []byte) []byte {
			if uri := jsonrpc.StringMember(item, "uri"); uri != "" {
				return setString(item, c.exposeURI(m, uri), "uri")
			}
			return item
		})
	}
}

// rewriteItems returns r with each element of its result's array field
// passed through f; r itself when nothing changed.
func rewriteItems(r *jsonrpc.Message, field string, f func([]byte) []byte) *jsonrpc.Message {
	span, ok := jsonrpc.Member(r.Result, field)
	if !ok || r.Result[span[0]] != '[' {
		return r
	}
	arr := r.Result[span[0]:span[1]]
	changed := false
	var items [][]byte
	for _, sp := range jsonrpc.Elements(arr, [2]int{0, len(arr)}) {
		item := arr[sp[0]:sp[1]]
		n := f(item)
		changed = changed || string(n) != string(item)
		items = append(items, n)
	}
	if !changed {
		return r
	}
	out, ok := jsonrpc.SetPath(r.Result, []byte("["+string(joinJSON(items))+"]"), field)
	if !ok {
		return r
	}
	return r.WithResult(out)
}

func joinJSON(items [][]byte) []byte {
	var b []byte
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return b
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
