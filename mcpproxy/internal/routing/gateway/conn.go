package gateway

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Conn is one client's connection to every upstream of a Registry: a
// mux.Conn that speaks the session era. Get one from Registry.Dial; its
// methods are safe for concurrent use. Recv closes only after Close.
type Conn struct {
	r      *Registry
	tenant string
	log    *slog.Logger
	out    chan *jsonrpc.Message
	done   chan struct{}
	once   sync.Once
	// ready is closed once initialize was answered: the client's other
	// requests wait for it, as a server reads its input in order.
	ready chan struct{}
	wg    sync.WaitGroup // the upstreams' goroutines
	// work hands a request to an idle worker (spawn); idle counts them.
	work chan func()
	idle atomic.Int32
	// initSent is set once the client sent initialize: a request before
	// it would wait for an initialize that may never come.
	initSent atomic.Bool
	// stateless is set when the client speaks the stateless era
	// (stateless.go); discovered is then the merged initialize result.
	stateless  atomic.Bool
	discovered []byte
	methods    sync.Map // a stateless-era request's id key → its method

	mu      sync.Mutex
	init    *jsonrpc.Message   // the client's initialize, replayed to each upstream
	members map[string]*member // by upstream name
	order   []string           // upstream names in configuration order
	calls   map[string]*call   // the client's requests in flight, by id key
	asks    map[string]ask     // upstreams' requests to the client, by minted id key
	nextAsk uint64
	names   names
}

// maxAsks bounds the upstreams' requests that wait for the client's
// answer on one Conn: an upstream that asks and asks while the client
// does not answer gets errors past it, instead of growing the table.
const maxAsks = 256

// ask is an upstream's request to the client, under the id the Conn gave
// it.
type ask struct {
	m  *member
	id []byte    // the upstream's own id
	at time.Time // when it was asked
}

// askWait is how long an upstream's request waits for the client's answer
// before the table may forget it (an SDK's request timeout is a minute).
const askWait = 5 * time.Minute

// forgetOldAsksLocked forgets the requests asked longer than askWait ago,
// and those of upstream connections that ended.
func (c *Conn) forgetOldAsksLocked() {
	for k, a := range c.asks {
		if time.Since(a.at) > askWait || a.m.current() == nil {
			delete(c.asks, k)
		}
	}
}

func newConn(r *Registry, tenant string) *Conn {
	return &Conn{r: r, tenant: tenant, log: r.log, out: make(chan *jsonrpc.Message, 16),
		done: make(chan struct{}), ready: make(chan struct{}), work: make(chan func()),
		members: map[string]*member{}, calls: map[string]*call{}, asks: map[string]ask{}, names: newNames()}
}

// Recv yields what the client receives.
func (c *Conn) Recv() <-chan *jsonrpc.Message { return c.out }

// Err is nil: a Conn ends only when it is closed, whatever its upstreams do.
func (c *Conn) Err() error { return nil }

// ErrClosed is returned by Send once the Conn is closed.
var ErrClosed = errors.New("gateway: connection closed")

// Close closes every upstream connection and then Recv.
func (c *Conn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.r.forget(c)
		c.mu.Lock()
		ms := make([]*member, 0, len(c.members))
		for _, m := range c.members {
			ms = append(ms, m)
		}
		c.mu.Unlock()
		for _, m := range ms {
			m.close()
		}
		go func() {
			c.wg.Wait()
			close(c.out)
		}()
	})
	return nil
}

// push hands the client a message of the Conn's own; it waits while the
// client's queue is full, and drops m (releasing its strings) once the
// Conn is closed.
func (c *Conn) push(m *jsonrpc.Message) {
	if m.IsResponse() {
		m = c.completed(m)
	}
	select {
	case c.out <- m:
	case <-c.done:
		spill.Release(m.Raw)
	}
}

// Send takes a message from the client. A request is served on a
// goroutine of its own (it may wait for an upstream), so Send does not
// block on upstreams.
func (c *Conn) Send(ctx context.Context, m *jsonrpc.Message) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	switch {
	case m.IsRequest():
		ctx = context.WithoutCancel(ctx)
		if m.Method == "initialize" {
			c.initSent.Store(true)
			go c.initialize(ctx, m)
			return nil
		}
		if !c.initSent.Load() {
			if !statelessRequest(m) {
				go c.push(beforeInitialize(m))
				return nil
			}
			if c.initSent.CompareAndSwap(false, true) {
				c.stateless.Store(true)
				go c.startStateless(m)
			}
		}
		c.asked(m)
		c.spawn(func() {
			select {
			case <-c.ready:
				c.request(ctx, m)
			case <-c.done:
			}
		})
		return nil
	case m.IsNotification():
		return c.notification(ctx, m)
	default:
		return c.answer(ctx, m)
	}
}

// maxIdleWorkers is how many of a Conn's request goroutines wait for
// the next request rather than end.
const maxIdleWorkers = 4

// spawn runs f on a goroutine of its own: a worker of the Conn's that is
// waiting for one, else a new one. A worker that is done waits for the
// next request (up to maxIdleWorkers of them, until the Conn closes)
// rather than end, so that the next request runs on the stack this one
// grew: on a fresh goroutine's stack a tools/call grows it by copying,
// several times, which cost about as much as resolving and forwarding it.
func (c *Conn) spawn(f func()) {
	select {
	case c.work <- f:
	default:
		go c.worker(f)
	}
}

// worker runs f, then each f spawn hands it, until it is one idle worker
// too many or the Conn closes.
func (c *Conn) worker(f func()) {
	for {
		f()
		if c.idle.Add(1) > maxIdleWorkers {
			c.idle.Add(-1)
			return
		}
		select {
		case f = <-c.work:
			c.idle.Add(-1)
		case <-c.done:
			return
		}
	}
}

// beforeInitialize answers a request the client sent before initialize:
// ping is answered; server/discover (a stateless-era client's probe) is
// not a method of the session era the gateway speaks, so such a client
// falls back to initialize; anything else must come after initialize.
func beforeInitialize(req *jsonrpc.Message) *jsonrpc.Message {
	switch req.Method {
	case "ping":
		return jsonrpc.Response(req.ID, []byte(`{}`))
	case "server/discover":
		return jsonrpc.ErrorResponse(req.ID, jsonrpc.CodeMethodNotFound, "Method not found: the gateway speaks the session era; send initialize")
	}
	return jsonrpc.ErrorResponse(req.ID, jsonrpc.CodeInvalidRequest, "Invalid Request: "+req.Method+" before initialize")
}

// notification takes a client's notification: initialized is the Conn's
// (each upstream had its own), a cancellation goes to the upstream of the
// request it names, anything else to every upstream that is up.
func (c *Conn) notification(ctx context.Context, n *jsonrpc.Message) error {
	switch n.Method {
	case "notifications/initialized":
		return nil
	case jsonrpc.MethodCancelled:
		c.mu.Lock()
		cl := c.calls[jsonrpc.Key(jsonrpc.CancelledID(n))]
		c.mu.Unlock()
		if cl != nil {
			cl.cancelled(ctx, n)
		}
		return nil
	}
	for _, m := range c.upMembers() {
		if mx := m.current(); mx != nil {
			if err := mx.Send(ctx, n); err != nil {
				m.log.Debug("passing a notification failed", "method", n.Method, "err", err)
			}
		}
	}
	return nil
}

// answer takes the client's answer to an upstream's request and sends it
// to that upstream under the upstream's own id.
func (c *Conn) answer(ctx context.Context, r *jsonrpc.Message) error {
	key := jsonrpc.Key(r.ID)
	c.mu.Lock()
	a, ok := c.asks[key]
	delete(c.asks, key)
	c.mu.Unlock()
	if !ok {
		c.log.Debug("dropping an answer to no request of an upstream's")
		return nil
	}
	mx := a.m.current()
	if mx == nil {
		return nil // that connection is gone; its request with it
	}
	return mx.Send(ctx, r.WithID(a.id))
}

// fromUpstream takes what upstream m sends on its own: a request to the
// client gets an id of the Conn's (and, where the upstream said which of
// its calls it belongs to, that call's client id as Related); a
// notification is passed on, a resource URI in it given its prefix.
func (c *Conn) fromUpstream(m *member, msg *jsonrpc.Message) {
	if msg.IsRequest() {
		c.mu.Lock()
		if len(c.asks) >= maxAsks {
			c.forgetOldAsksLocked()
		}
		if len(c.asks) >= maxAsks {
			c.mu.Unlock()
			if mx := m.current(); mx != nil {
				mx.Send(context.Background(), jsonrpc.ErrorResponse(msg.ID, jsonrpc.CodeInternalError, "too many requests wait for the client"))
			}
			spill.Release(msg.Raw)
			return
		}
		c.nextAsk++
		id := strconv.AppendQuote(nil, "gw-"+strconv.FormatUint(c.nextAsk, 10))
		c.asks[jsonrpc.Key(id)] = ask{m: m, id: msg.ID, at: time.Now()}
		c.mu.Unlock()
		out := msg.WithID(id)
		if mx := m.current(); msg.Related != nil && mx != nil {
			if sink, _ := mx.Caller(msg.Related); sink != nil {
				if cs, ok := sink.(*callSink); ok {
					out.Related = cs.call.clientID
				}
			}
		}
		m.push(out)
		return
	}
	if msg.Method == "notifications/resources/updated" {
		if uri := jsonrpc.StringMember(msg.Params, "uri"); uri != "" {
			msg = msg.WithParams(setString(msg.Params, c.exposeURI(m, uri), "uri"))
		}
	}
	m.push(msg)
}

// listsChanged tells the client that the tools, prompts and resources
// changed (an upstream came, went or came back), once initialize was
// answered.
func (c *Conn) listsChanged() {
	select {
	case <-c.ready:
	default:
		return
	}
	go func() {
		for _, k := range []string{"tools", "prompts", "resources"} {
			c.push(jsonrpc.Notification("notifications/"+k+"/list_changed", nil))
		}
	}()
}

// upMembers returns the configured upstreams, in order.
func (c *Conn) upMembers() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*member, 0, len(c.order))
	for _, name := range c.order {
		out = append(out, c.members[name])
	}
	return out
}

// member returns the configured upstream named name, or nil.
func (c *Conn) member(name string) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[name]
}

// upStates reports, for each upstream, whether its connection is up.
func (c *Conn) upStates() map[string]bool {
	out := map[string]bool{}
	for _, m := range c.upMembers() {
		out[m.spec.Name] = m.current() != nil
	}
	return out
}

// reconfigure follows the Registry's new list of upstreams.
func (c *Conn) reconfigure(specs []Spec) {
	select {
	case <-c.done:
		return
	default:
	}
	c.mu.Lock()
	keep := map[string]bool{}
	var gone []*member
	var added []*member
	order := make([]string, 0, len(specs))
	for _, s := range specs {
		keep[s.Name] = true
		order = append(order, s.Name)
		old := c.members[s.Name]
		if old != nil && old.spec.Version == s.Version {
			continue
		}
		if old != nil {
			gone = append(gone, old)
		}
		m := newMember(c, s)
		c.members[s.Name] = m
		added = append(added, m)
	}
	for name, m := range c.members {
		if !keep[name] {
			gone = append(gone, m)
			delete(c.members, name)
		}
	}
	c.order = order
	started := c.init != nil
	c.mu.Unlock()
	for _, m := range gone {
		go m.drain(c.r.o.Drain)
	}
	if started {
		for _, m := range added {
			m.start()
		}
	}
	if len(gone) > 0 || len(added) > 0 {
		c.listsChanged()
	}
}
